"""Submission: split a job into validated subjobs, record the intent, hand the subjobs to
their backend in bulk, roll back what failed; and recover, at start-up, submissions a crash
interrupted."""
