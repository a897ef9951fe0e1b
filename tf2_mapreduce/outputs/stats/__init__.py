"""Dataset statistics as others read them: TFDV's proto, a JSON document and the console's
table, and one self-contained web page."""
