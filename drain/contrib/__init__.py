"""Enqueueing from the frameworks apps are built on: Django and SQLAlchemy.

Each submodule is imported only by the app that uses it (``import drain`` never
loads Django or SQLAlchemy). Finding the psycopg 3 connection behind whatever the
app holds is the store's (:mod:`drain.store.driver`), which the async API shares.
"""
