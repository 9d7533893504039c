"""Browser sessions (/browsers): records, drivers, telemetry and logs."""
