"""A minimal Django project on the test's database, for tests/test_contrib_django.py."""
