"""What the CLI says of a result it wrote, and of sizes (`cli.console`)."""

from tf2_mapreduce.cli import console


def test_what_was_written_is_said_in_words_of_the_right_number():
    one = {"vocabularies": {"query": {}}}
    two = {"vocabularies": {"query": {}, "tags": {}}}
    assert console.wrote(one, "vocab/") == "wrote 1 vocabulary to vocab/"
    assert console.wrote(two, "vocab/") == "wrote 2 vocabularies to vocab/"
    stats = {"files": ["stats.pb", "stats.json", "stats.html"]}
    assert console.wrote(stats, "stats/") == "wrote stats.pb, stats.json, stats.html to stats/"


def test_sizes_are_said_in_units_a_reader_takes_in():
    assert [console.human_bytes(n) for n in (0, 999, 1000, 4997, 1_500_000, 2e12, 3e15)] == [
        "0 B",
        "999 B",
        "1.0 KB",
        "5.0 KB",
        "1.5 MB",
        "2.0 TB",
        "3000.0 TB",
    ]
