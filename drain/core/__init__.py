"""The bottom layer: jobs, errors, the run's summary, the settings table and the config built from it, durations, redaction, table names. No database driver, no clock."""
