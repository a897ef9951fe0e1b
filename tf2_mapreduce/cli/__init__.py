"""The command line's parts: the steps of a coordinator run, what the programs print, their
help and flag errors, and the cluster flags both programs take."""
