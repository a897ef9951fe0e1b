"""What a job gives back: its `Result`, how each kind of result is worded and written (files,
vocabularies, statistics, TensorBoard; `sinks`: records as the job runs), and their directories."""
