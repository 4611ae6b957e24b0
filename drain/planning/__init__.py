"""Pure schedule arithmetic: will the compute sleep under these cron schedules, read from which deployment files, drawn how. No database; croniter lives here alone."""
