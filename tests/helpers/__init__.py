"""What the tests share: oracles in plain Python, corpora and tf.Example writers, real
processes reaped on exit, a Cloud Storage server, hosts of their own. Importable as
`helpers.<module>` from every test directory and from tests/soak.py (tests/ is on sys.path)."""
