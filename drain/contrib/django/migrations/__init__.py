"""drain's schema steps for ``manage.py migrate`` (see :mod:`drain.contrib.django.steps`)."""
