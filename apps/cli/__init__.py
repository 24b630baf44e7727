"""The ``nodeau`` command line."""
