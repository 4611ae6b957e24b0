#!/usr/bin/env python
"""A Django project's manage.py, for the tests of ``manage.py drain_run``."""

import sys

from django.core.management import execute_from_command_line

if __name__ == "__main__":
    execute_from_command_line(sys.argv)
