"""Slowdowns, pure: is a revision slower than another by more than a threshold, judged on repeated
samples with a rank test, and how many samples it takes to say. No git, SQL or torch."""
