"""Hosts of their own on one machine, for the tests and the soak: each a network
namespace with its own IP address, joined by a veth pair to a bridge in one more
namespace (the switch), so tasks reach each other only over those links, as on
separate machines, and a link can be cut. Needs root and iproute2.
"""

import os
import shutil
import subprocess

__all__ = ["PORT", "SwitchedHosts", "why_not", "remove_stale"]

PORT = 2222  # every host has its own address, so one port serves all, as on real machines
PREFIX = "tfmr"  # namespaces are named PREFIX<pid>-<tag>[-...]: `remove_stale` finds them by it


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def why_not():
    """None if network namespaces can be made here, else why not."""
    if not shutil.which("ip"):
        return "iproute2's ip command is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces and veth pairs needs root"
    probe = "%s%d-probe" % (PREFIX, os.getpid())
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, timeout=30)
    if made.returncode:
        return "ip netns add failed: %s" % made.stderr.decode(errors="replace").strip()
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True, timeout=30)
    return None


def remove_stale():
    """Deletes the namespaces of runs that died without cleaning up (killed by a hang
    guard, say): their names carry the pid of a process that is gone."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=30).stdout.decode()
    for name in (line.split()[0] for line in listed.splitlines() if line.startswith(PREFIX)):
        pid = name[len(PREFIX) :].split("-")[0]
        if pid.isdigit() and not os.path.exists("/proc/%s" % pid):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)


class SwitchedHosts:
    """Hosts `names` on one switch; `tag` (0-249) tells apart the sets a process makes,
    in namespace, link and subnet names. `addresses`: name -> "ip:PORT"."""

    def __init__(self, names, tag=0):
        self.prefix = "%s%d-%d" % (PREFIX, os.getpid(), tag)
        self.switch = self.prefix + "-switch"
        self.created, self.namespaces, self.links, self.addresses = [], {}, {}, {}
        # Interface names hold at most 15 characters: these are short, and unique to the set.
        link = "v%x%d" % (os.getpid() & 0xFFFFF, tag)
        try:
            self._add(self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for i, name in enumerate(names):
                namespace = "%s-%d" % (self.prefix, i)
                self._add(namespace)
                host_end, switch_end = "%sh%d" % (link, i), "%ss%d" % (link, i)
                _ip(
                    "link",
                    "add",
                    host_end,
                    "netns",
                    namespace,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    switch_end,
                    "netns",
                    self.switch,
                )
                _ip("-n", self.switch, "link", "set", switch_end, "master", "br0", "up")
                # Each set is a network of its own: sets with the same addresses never meet.
                address = "10.77.%d.%d" % (tag, i + 1)
                _ip("-n", namespace, "addr", "add", address + "/24", "dev", host_end)
                _ip("-n", namespace, "link", "set", host_end, "up")
                _ip("-n", namespace, "link", "set", "lo", "up")
                self.namespaces[name], self.links[name] = namespace, switch_end
                self.addresses[name] = "%s:%d" % (address, PORT)
        except BaseException:
            self.delete()
            raise

    def _add(self, namespace):
        _ip("netns", "add", namespace)
        self.created.append(namespace)

    def command(self, name, argv):
        """`argv` run on host `name`."""
        return ["ip", "netns", "exec", self.namespaces[name], *argv]

    def set_link(self, name, state):
        """Sets host `name`'s link "up" or "down", at the switch."""
        _ip("-n", self.switch, "link", "set", self.links[name], state)

    def delete(self):
        for namespace in reversed(self.created):
            subprocess.run(["ip", "netns", "delete", namespace], capture_output=True, timeout=30)
