#!/usr/bin/env python3
"""Writes the hwloc XML topologies the placement tests load (tests/topo/README.md).

    python3 tests/topo/make_topologies.py

Each file is what hwloc 2.x would export for the machine: packages with
their NUMA node, cores and PUs, then the PCI tree (host bridges, switches,
GPUs, NICs) with the OS devices hwloc's Linux, CUDA and NVML backends name
under them. Attributes come in the order hwloc writes them. No XML comments:
hwloc's built-in (non-libxml2) parser refuses them.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))

GEN5_X16 = "63.015385"  # GB/s: 32 GT/s x 16 lanes x 128/130 / 8, as hwloc prints it
GEN2_X4 = "2.000000"    # 5 GT/s x 4 lanes x 8/10 / 8

# hwloc_obj_osdev_type_e (hwloc 2.x), written as numbers in XML
OSDEV_GPU, OSDEV_NETWORK, OSDEV_OPENFABRICS, OSDEV_COPROC = 1, 2, 3, 5

SWITCH = "0604 [1000:c030] [1000:c030] b0"  # pci_type of a Broadcom PEX890xx switch port

PORT_ACTIVE, PORT_DOWN = 4, 1  # IB port states (/sys/class/infiniband/*/ports/N/state)


def bitmap(bits):
    """hwloc's bitmap text (hwloc_bitmap_snprintf): 32-bit words, most
    significant first; a zero word is empty, or "0x0" when it is the last."""
    bits = list(bits)
    if not bits:
        return "0x0"
    words = [0] * (max(bits) // 32 + 1)
    for b in bits:
        words[b // 32] |= 1 << (b % 32)
    text = ["0x%08x" % w if w else "" for w in reversed(words)]
    if not text[-1]:
        text[-1] = "0x0"
    return ",".join(text)


def set_attrs(cpus, nodes, root=False):
    """cpuset/nodeset attributes; the root object also carries the allowed ones."""
    c, n = bitmap(cpus), bitmap(nodes)
    a = dict(cpuset=c, complete_cpuset=c)
    if root:
        a["allowed_cpuset"] = c
    a.update(nodeset=n, complete_nodeset=n)
    if root:
        a["allowed_nodeset"] = n
    return a


class Topology:
    """One XML file being written; objects are numbered (gp_index) in order."""

    def __init__(self):
        self.lines = ['<?xml version="1.0" encoding="UTF-8"?>',
                      '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
                      '<topology version="2.0">']
        self.depth = 1
        self.gp = 0

    def _put(self, text):
        self.lines.append("  " * self.depth + text)

    def open(self, typ, sets=None, infos=(), leaf=False, os_index=None, **attrs):
        """An <object>; attrs after gp_index (name, subtype, type-specific ones)."""
        self.gp += 1
        a = {} if os_index is None else {"os_index": os_index}
        a.update(sets or {})
        a["gp_index"] = self.gp
        a.update(attrs)
        text = "".join(' %s="%s"' % kv for kv in a.items())
        if leaf and not infos:
            self._put('<object type="%s"%s/>' % (typ, text))
            return
        self._put('<object type="%s"%s>' % (typ, text))
        self.depth += 1
        for name, value in infos:
            self._put('<info name="%s" value="%s"/>' % (name, value))
        if leaf:
            self.close()

    def leaf(self, typ, **kw):
        self.open(typ, leaf=True, **kw)

    def close(self):
        self.depth -= 1
        self._put("</object>")

    def numa_latency(self, matrix):
        """The NUMALatency matrix (kind 5: from the OS, means latency), by os_index."""
        idx = "".join("%d " % i for i in range(len(matrix)))
        val = "".join("%d " % v for row in matrix for v in row)
        self._put('<distances2 type="NUMANode" nbobjs="%d" kind="5" name="NUMALatency" '
                  'indexing="os">' % len(matrix))
        self._put('  <indexes length="%d">%s</indexes>' % (len(idx), idx))
        self._put('  <u64values length="%d">%s</u64values>' % (len(val), val))
        self._put("</distances2>")

    def text(self):
        assert self.depth == 1, "unbalanced objects"
        return "\n".join(self.lines + ["</topology>"]) + "\n"


def busid(bus, dev=0, func=0):
    return "0000:%02x:%02x.%x" % (bus, dev, func)


def host_bridge(x, first, last):
    x.open("Bridge", bridge_type="0-1", depth=0, bridge_pci="0000:[%02x-%02x]" % (first, last))


def switch_port(x, depth, at, first, last):
    """A PCI-to-PCI bridge (a switch port) at `at`, forwarding buses first..last."""
    x.open("Bridge", bridge_type="1-1", depth=depth, bridge_pci="0000:[%02x-%02x]" % (first, last),
           pci_busid=at, pci_type=SWITCH, pci_link_speed=GEN5_X16)


def h100(x, bus, k):
    """NVIDIA H100 SXM5 80GB: CUDA device k (COPROC cudaK) and NVML device k (GPU nvmlK)."""
    x.open("PCIDev", pci_busid=busid(bus), pci_type="0302 [10de:2330] [10de:16c1] a1",
           pci_link_speed=GEN5_X16)
    model = ("GPUModel", "NVIDIA H100 80GB HBM3")
    x.leaf("OSDev", name="cuda%d" % k, subtype="CUDA", osdev_type=OSDEV_COPROC, infos=[
        ("Backend", "CUDA"), ("GPUVendor", "NVIDIA Corporation"), model,
        ("CUDAGlobalMemorySize", "83036288"),     # KiB, as the CUDA backend writes it
        ("CUDAL2CacheSize", "51200"), ("CUDAMultiProcessors", "132"),
        ("CUDACoresPerMP", "128"), ("CUDASharedMemorySizePerMP", "228")])
    x.leaf("OSDev", name="nvml%d" % k, subtype="NVML", osdev_type=OSDEV_GPU, infos=[
        ("Backend", "NVML"), ("GPUVendor", "NVIDIA Corporation"), model,
        ("NVIDIASerial", "16520230%05d" % k),
        ("NVIDIAUUID", "GPU-ada90000-0000-4000-8000-%012x" % k)])
    x.close()


def connectx7(x, bus, k, port_state):
    """ConnectX-7 (InfiniBand): verbs device mlx5_K with one port, and its IPoIB interface ibpK."""
    guid = "b83f:d203:00a8:%04x" % k
    x.open("PCIDev", pci_busid=busid(bus), pci_type="0207 [15b3:1021] [15b3:0041] 00",
           pci_link_speed=GEN5_X16)
    x.leaf("OSDev", name="mlx5_%d" % k, osdev_type=OSDEV_OPENFABRICS, infos=[
        ("NodeGUID", guid), ("SysImageGUID", guid),
        ("Port1State", port_state), ("Port1LID", "0x%x" % (k + 1)), ("Port1LMC", "0"),
        ("Port1GID0", "fe80:0000:0000:0000:" + guid)])
    ipoib = "00:00:10:29:fe:80:00:00:00:00:00:00:b8:3f:d2:03:00:a8:%02x:%02x" % (k >> 8, k & 255)
    x.leaf("OSDev", name="ibp%d" % k, osdev_type=OSDEV_NETWORK,
           infos=[("Address", ipoib), ("Port", "1")])
    x.close()


def ethernet(x, bus, name):
    """Intel I350 port: Ethernet only, no verbs device."""
    x.open("PCIDev", pci_busid=busid(bus), pci_type="0200 [8086:1521] [8086:0001] 01",
           pci_link_speed=GEN2_X4)
    x.leaf("OSDev", name=name, osdev_type=OSDEV_NETWORK, infos=[("Address", "02:ad:a9:00:00:01")])
    x.close()


def server(down_port_nic=None):
    """2 sockets x 16 cores x 2 threads, one NUMA node (256 GiB) each. Per socket
    two host bridges, each with one PCIe switch holding 2 H100s and 1 ConnectX-7:
    switch j (j = 2*socket + bridge) has GPUs 2j, 2j+1 and mlx5_j. eno1 sits on
    socket 0's first root bus beside its switch. Host bridge j owns buses
    8j+1..8j+8: eno1 at 01:00.0, switch upstream port at (8j+1):01.0, its
    downstream ports at (8j+2):00-02.0 leading to GPU, GPU, NIC on 8j+3..8j+5."""
    x = Topology()
    x.open("Machine", os_index=0, sets=set_attrs(range(64), [0, 1], root=True),
           infos=[("Backend", "Linux"), ("HostName", "gpu-server")])
    for s in range(2):
        # core c (0-31) has PUs c and c+32: socket 0 has PUs 0-15,32-47
        cpus = list(range(16 * s, 16 * s + 16)) + list(range(32 + 16 * s, 48 + 16 * s))
        x.open("Package", os_index=s, sets=set_attrs(cpus, [s]))
        x.leaf("NUMANode", os_index=s, sets=set_attrs(cpus, [s]), local_memory=256 << 30)
        for core in range(16 * s, 16 * s + 16):
            x.open("Core", os_index=core, sets=set_attrs([core, core + 32], [s]))
            for pu in (core, core + 32):
                x.leaf("PU", os_index=pu, sets=set_attrs([pu], [s]))
            x.close()
        for h in range(2):
            j = 2 * s + h
            root = 8 * j + 1
            host_bridge(x, root, root + 7)
            if j == 0:
                ethernet(x, root, "eno1")
            switch_port(x, 1, busid(root, 1), root + 1, root + 7)  # upstream port
            for port in range(3):
                bus = root + 2 + port
                switch_port(x, 2, busid(root + 1, port), bus, bus)  # downstream
                if port < 2:
                    h100(x, bus, 2 * j + port)
                else:
                    connectx7(x, bus, j, PORT_DOWN if j == down_port_nic else PORT_ACTIVE)
                x.close()
            x.close()  # upstream port
            x.close()  # host bridge
        x.close()  # package
    x.close()  # machine
    x.numa_latency([[10, 21], [21, 10]])
    return x.text()


def this_machine():
    """The 2-CPU test VM as 2 sockets, each with its own NUMA node (PU s on node s),
    one host bridge and one H100 directly on its root bus (cuda0: 10:00.0 on node 0,
    cuda1: 20:00.0 on node 1). No NICs."""
    x = Topology()
    x.open("Machine", os_index=0, sets=set_attrs([0, 1], [0, 1], root=True),
           infos=[("Backend", "Linux"), ("HostName", "two-node-vm")])
    for s in range(2):
        x.open("Package", os_index=s, sets=set_attrs([s], [s]))
        x.leaf("NUMANode", os_index=s, sets=set_attrs([s], [s]), local_memory=6 << 30)
        x.open("Core", os_index=s, sets=set_attrs([s], [s]))
        x.leaf("PU", os_index=s, sets=set_attrs([s], [s]))
        x.close()
        bus = 0x10 * (s + 1)
        host_bridge(x, bus, bus)
        h100(x, bus, s)
        x.close()  # host bridge
        x.close()  # package
    x.close()
    x.numa_latency([[10, 21], [21, 10]])
    return x.text()


def main():
    files = {
        "server-2s8g4n.xml": server(),
        "server-2s8g4n-downport.xml": server(down_port_nic=1),
        "thismachine-2numa.xml": this_machine(),
    }
    for name, text in files.items():
        with open(os.path.join(HERE, name), "w") as f:
            f.write(text)
        print("wrote", os.path.join("tests/topo", name))


if __name__ == "__main__":
    main()
