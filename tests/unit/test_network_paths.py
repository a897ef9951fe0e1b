"""The inputs and outputs that need the network, which the local cluster's private network
namespace would not reach, are found before it is made, even inside @lists."""

from tf2_mapreduce.cluster import netns


def test_paths_that_need_the_network_are_found_even_inside_lists(tmp_path):
    listing = tmp_path / "inputs.txt"
    listing.write_text("/data/a.txt\ns3://bucket/b.txt\n")
    assert netns.network_path(["/data", "file:///data/x", "ram://tmp/y", None]) is None
    assert netns.network_path(["/data", None, "gs://bucket/out.json"]) == "gs://bucket/out.json"
    assert netns.network_path(["@%s" % listing]) == "s3://bucket/b.txt"
    assert netns.network_path(["@%s" % (tmp_path / "missing.txt")]) is None  # reported when inputs are listed
