"""Running a job on a connected cluster: its options, its one preparation, the rounds of
map steps and the loop that watches them, failures and recovery, checkpoints."""
