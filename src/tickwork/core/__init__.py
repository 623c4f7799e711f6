"""The pure domain: records, states, schedules, retry policy. No I/O, no clock reads."""
