"""What a job reads: input specs listed into checked files, their formats, the pieces a
file is cut into, and how a piece is read."""
