"""The ``podmedic`` command line; nothing else imports it."""
