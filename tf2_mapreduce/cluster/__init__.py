"""The cluster: who is in it (specs and the sources that describe them), its servers (local
ones, and a task's own), this process as its chief, and the messages between them."""
