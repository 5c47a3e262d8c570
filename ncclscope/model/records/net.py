"""Network records: interfaces, IB devices, plugins, the network chosen, GDR, socket and IB errors
(grammar/families/net.lark)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import ClassVar

from ncclscope.model.records.base import Part, Record, record


class PluginType(StrEnum):
    """The kind of plugin a line is about.

    NCCL names it in several ways: the ``TUNER/Plugin:`` prefix (2.21+), a type word (``Loaded
    collnet plugin``, ``External network plugin``), or the symbol it looked for
    (``ncclCollNetPlugin_v8``). Lines older than 2.21 say ``NET/Plugin`` for every kind. The
    grammar hands over the text that names the type and this enum reads it, most specific first.
    """

    NET = "NET"
    COLLNET = "COLLNET"
    TUNER = "TUNER"
    PROFILER = "PROFILER"
    ENV = "ENV"
    GIN = "GIN"
    RMA = "RMA"

    @classmethod
    def _missing_(cls, value: object) -> PluginType | None:
        if not isinstance(value, str):
            return None
        symbol = _SYMBOL.search(value)
        if symbol:
            return _BY_WORD[symbol.group(1).lower()]
        word = _TYPE_WORD.search(value)
        if word:
            return _BY_WORD[word.group(1).lower()]
        prefix = _PREFIX.match(value)
        if prefix:
            return cls(prefix.group(1))
        return _BY_WORD.get(value.strip().lower())


_SYMBOL = re.compile(r"nccl(CollNet|Net|Tuner|Profiler|Gin|Rma|Env)")
_TYPE_WORD = re.compile(
    r"\b(collnet|coll|net|network|gin|rma|tuner|profiler|env)(?= plugin\b|:)", re.IGNORECASE
)
_PREFIX = re.compile(r"(NET|TUNER|PROFILER|ENV|GIN|RMA)/Plugin")
_BY_WORD = {
    "net": PluginType.NET,
    "network": PluginType.NET,
    "coll": PluginType.COLLNET,
    "collnet": PluginType.COLLNET,
    "tuner": PluginType.TUNER,
    "profiler": PluginType.PROFILER,
    "env": PluginType.ENV,
    "gin": PluginType.GIN,
    "rma": PluginType.RMA,
}


# --- parts ----------------------------------------------------------------------------------------


@record
class NetInterface(Part):
    """One network interface of a ``Bootstrap``/``NET/Socket`` list or an IB OOB:
    ``[0]ib0:192.168.10.11<0>`` (index, name, address, port; port 0 means not yet bound)."""

    KIND: ClassVar[str] = "net_interface"
    index: int | None = None
    name: str
    #: IPv4, IPv6 with its ``%scope`` (``fe80::…%ib0``), or what a log redacted (``x.x.x.x``).
    address: str
    #: None when a line cut at 1024 bytes ends inside this interface.
    port: int | None = None


@record
class IbDevice(Part):
    """One HCA port of a ``NET/IB : Using`` list: ``[1]mlx5_1:1/RoCE``."""

    KIND: ClassVar[str] = "ib_device"
    index: int
    name: str
    port: int
    #: ``IB``, ``RoCE``, ``UNSPECIFIED``.
    link_layer: str
    #: 2.30.7 rail and plane numbers, when printed.
    rail: int | None = None
    plane: int | None = None
    #: Extra ``/X`` tags a plugin adds (``SHARP`` from nccl-rdma-sharp-plugins).
    features: tuple[str, ...] = ()


@record
class IbMergedDevice(Part):
    """A merged dual-port NIC (2.20-2.23): ``[0]={[0] mlx5_0:1/IB, [1] mlx5_1:1/IB}``."""

    KIND: ClassVar[str] = "ib_merged_device"
    index: int
    members: tuple[IbDevice, ...] = ()


# --- network choice and interfaces ----------------------------------------------------------------


@record
class UsingNetwork(Record):
    """``Using network IB``: the network NCCL chose (``IB``, ``Socket`` or a plugin's name)."""

    KIND: ClassVar[str] = "using_network"
    network: str


@record
class BootstrapInterfaces(Record):
    """``Bootstrap : Using ib0:192.168.10.11<0>``: the interface(s) the out-of-band bootstrap uses."""

    KIND: ClassVar[str] = "bootstrap_interfaces"
    interfaces: tuple[NetInterface, ...] = ()


@record
class BootstrapOobNet(Record):
    """``Bootstrap: Using mlx5_0:1`` (2.24+, NCCL_OOB_NET_ENABLE): the bootstrap runs over a net
    device and port instead of a socket interface."""

    KIND: ClassVar[str] = "bootstrap_oob_net"
    name: str
    oob_port: int


@record
class SocketInterfaces(Record):
    """``NET/Socket : Using [0]eth0:10.0.0.11<0>``: the NICs the socket transport would carry data on."""

    KIND: ClassVar[str] = "socket_interfaces"
    interfaces: tuple[NetInterface, ...] = ()


@record
class SocketThreads(Record):
    """``NET/Socket: Using 2 threads and 8 sockets per thread``."""

    KIND: ClassVar[str] = "socket_threads"
    threads: int
    sockets_per_thread: int


@record
class InterfaceSpeed(Record):
    """``Could not get speed from /sys/class/net/lo/speed. Defaulting to 10 Gbps.`` or
    ``Found network interface eth0 with speed 100000 Mbps``."""

    KIND: ClassVar[str] = "interface_speed"
    #: the interface name, or the sysfs path NCCL failed to read (<= 2.29)
    interface: str
    speed_mbps: int | None = None
    #: set when NCCL could not read the speed and assumed this many Gbps
    default_gbps: int | None = None


@record
class InterfaceInSubnet(Record):
    """``NET : Found interface eth0:10.0.0.11 in the same subnet as remote address 10.0.0.1`` (2.3-2.4)."""

    KIND: ClassVar[str] = "interface_in_subnet"
    interfaces: tuple[NetInterface, ...] = ()
    remote_address: str


# --- IB devices -----------------------------------------------------------------------------------


@record
class IbDevices(Record):
    """``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ib0:192.168.10.11<0>``: the HCAs
    the IB transport can use, whether PCI relaxed ordering is on, and the OOB interface."""

    KIND: ClassVar[str] = "ib_devices"
    devices: tuple[IbDevice | IbMergedDevice, ...] = ()
    relaxed_ordering: bool = False
    oob: NetInterface | None = None


@record
class IbNoDevice(Record):
    """``NET/IB : No device found.``: no active IB/RoCE port; NCCL moves on to the next network."""

    KIND: ClassVar[str] = "ib_no_device"


@record
class IbDeviceDetail(Record):
    """``NET/IB: [0] mlx5_0:uverbs0:1/RoCE provider=Mlx5 speed=100000 context=0x… pciPath=… ar=0``
    (NET, 2.27+): one HCA port with its speed (Mbps) and adaptive routing."""

    KIND: ClassVar[str] = "ib_device_detail"
    index: int
    name: str
    uverbs: str
    port: int
    link_layer: str
    provider: str
    speed: int
    context: str
    pci_path: str
    adaptive_routing: int
    ooo_rq_size: int | None = None


@record
class IbVirtualDevice(Record):
    """``NET/IB : Made virtual device [2] name=mlx5_0+mlx5_1 speed=200000 ndevs=2`` (2.24+)."""

    KIND: ClassVar[str] = "ib_virtual_device"
    index: int
    name: str
    speed: int
    ndevs: int
    rail: int | None = None
    plane: int | None = None


@record
class IbQpInfo(Record):
    """``NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1234 mtu 5 LID 7 …`` (NET): one queue pair set up."""

    KIND: ClassVar[str] = "ib_qp_info"
    #: 2.29.7+ names the side first (``Send``/``Recv`` comm)
    context_name: str | None = None
    dev_index: int | None = None
    ib_dev: int
    port: int
    qpn: int
    mtu: int
    #: the rest as printed: ``LID 7 …`` or ``GID 3 (…)`` (RoCE), ECE and FIFO keys
    details: str | None = None


@record
class LibraryOpenFailed(Record):
    """``Failed to open libibverbs.so[.1]``: the verbs (or mlx5, gdrcopy) library is missing, so IB
    (or that feature) is off. ``Count not open %s`` (sic) in 2.30.3+."""

    KIND: ClassVar[str] = "library_open_failed"
    library: str
    error: str | None = None


@record
class DlsymFailed(Record):
    """``dlvsym failed on mlx5dv_reg_dmabuf_mr - …libmlx5.so: undefined symbol: …``: an optional
    library symbol is missing, so the feature that needs it is off."""

    KIND: ClassVar[str] = "dlsym_failed"
    symbol: str
    error: str | None = None


@record
class NicDistance(Record):
    """``CUDA Dev 6[6], Socket NIC distance :  PHB`` (2.4), ``CUDA Dev 0, IP Interfaces : eth0(PHB)``
    (2.3): how far this GPU is from each NIC, as path types."""

    KIND: ClassVar[str] = "nic_distance"
    cuda_dev: int
    nvml_dev: int | None = None
    net_name: str | None = None
    distances: tuple[str, ...] = ()


# --- plugins --------------------------------------------------------------------------------------


@record
class PluginNotFound(Record):
    """``NET/Plugin : No plugin found (libnccl-net.so), using internal implementation`` and its
    spellings up to ``NET/Plugin: Could not find: libnccl-net.so``: no external plugin library."""

    KIND: ClassVar[str] = "plugin_not_found"
    plugin_type: PluginType
    libraries: tuple[str, ...] = ()
    #: 2.19-2.20 print the dlerror first
    error: str | None = None
    #: what NCCL does instead (``internal implementation``, ``internal network plugin``)
    fallback: str | None = None


@record
class PluginLoadFailed(Record):
    """``NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared
    object file: No such file or directory``: the dlopen error of a plugin library."""

    KIND: ClassVar[str] = "plugin_load_failed"
    plugin_type: PluginType
    library: str | None = None
    errno: int | None = None
    error: str


@record
class PluginLoaded(Record):
    """``NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)``, ``TUNER/Plugin: Using X (v3)``,
    ``Successfully loaded external network plugin libnccl-net.so``: a plugin is in use."""

    KIND: ClassVar[str] = "plugin_loaded"
    plugin_type: PluginType | None = None
    plugin_name: str | None = None
    #: the plugin API version (``(v8)``)
    version: int | None = None
    library: str | None = None


@record
class PluginInternal(Record):
    """``NET/Plugin: Using internal network plugin.`` (2.21-2.25)."""

    KIND: ClassVar[str] = "plugin_internal"
    plugin_type: PluginType


@record
class PluginSymbolMissing(Record):
    """``NET/Plugin: Failed to find ncclCollNetPlugin_v8 symbol.``: the library lacks this API
    version; NCCL tries older ones next. Only the last of a run means the plugin is unusable."""

    KIND: ClassVar[str] = "plugin_symbol_missing"
    plugin_type: PluginType
    symbol_version: int | None = None
    #: ``v4 or v5``, ``>= v5``
    versions_tried: str | None = None
    library: str | None = None


@record
class PluginInitialized(Record):
    """``Initialized NET plugin IB`` (2.27+)."""

    KIND: ClassVar[str] = "plugin_initialized"
    plugin_type: PluginType
    plugin_name: str


@record
class PluginInitFailed(Record):
    """``Failed to initialize NET plugin IB`` (2.28+) or ``Failed to initialize any NET plugin``."""

    KIND: ClassVar[str] = "plugin_init_failed"
    plugin_type: PluginType | None = None
    #: None for ``any``
    plugin_name: str | None = None


@record
class PluginAssigned(Record):
    """``Assigned NET plugin IB to comm`` (2.27+), also GIN and RMA plugins."""

    KIND: ClassVar[str] = "plugin_assigned"
    plugin_type: PluginType
    plugin_name: str
    gin_type: int | None = None


@record
class PluginUnsupported(Record):
    """``External network plugin libnccl-net.so is unsupported`` (2.28+)."""

    KIND: ClassVar[str] = "plugin_unsupported"
    plugin_type: PluginType
    plugin_name: str


@record
class PluginsDisabled(Record):
    """``Disabling external plugins: NCCL_NET=IB`` (2.27+)."""

    KIND: ClassVar[str] = "plugins_disabled"
    plugin_type: PluginType | None = None
    reason: str


@record
class PluginEnvName(Record):
    """``NET/Plugin: Plugin name set by env to aws-ofi``: the plugin name NCCL_NET_PLUGIN asked for."""

    KIND: ClassVar[str] = "plugin_env_name"
    plugin_type: PluginType | None = None
    plugin_name: str


@record
class PluginClosed(Record):
    """``NET/Plugin: Closing net plugin 'IB'``, ``Unloading plugin libnccl-net.so``."""

    KIND: ClassVar[str] = "plugin_closed"
    plugin_type: PluginType | None = None
    plugin_name: str


@record
class NetPluginDeviceApi(Record):
    """``Using non-device net plugin version 0`` / ``Using NCCL_NET_DEVICE_UNPACK net plugin
    version 7`` (2.19+): whether the plugin unpacks on the device (TCPX-style)."""

    KIND: ClassVar[str] = "net_plugin_device_api"
    device_api: str
    version: int


@record
class NetworkNotFound(Record):
    """WARN ``Error: network IB not found.`` (2.10-2.26): NCCL_NET names no available network."""

    KIND: ClassVar[str] = "network_not_found"
    network: str


@record
class PluginPath(Record):
    """``Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so`` (nccl-rdma-sharp-plugins)."""

    KIND: ClassVar[str] = "plugin_path"
    library_path: str


@record
class PxnDisabledPlugin(Record):
    """``PXN Disabled as plugin is v4`` (2.12.7+): the net plugin is too old for PXN."""

    KIND: ClassVar[str] = "pxn_disabled_plugin"
    plugin_version: int


# --- external network plugins (aws-ofi-nccl, GPUDirect-TCPX, IBext, …) ----------------------------


@record
class OfiProviderSelected(Record):
    """``NET/OFI Selected Provider is efa (found 16 nics)``: the libfabric provider aws-ofi-nccl uses."""

    KIND: ClassVar[str] = "ofi_provider_selected"
    plugin: str
    provider: str
    nics: int | None = None


@record
class NetPluginProviderNotFound(Record):
    """``NET/OFI No eligible providers were found``, ``NET/OFI Couldn't find any optimal provider``:
    the plugin found no usable fabric provider (EFA driver, libfabric or device missing)."""

    KIND: ClassVar[str] = "net_plugin_provider_not_found"
    plugin: str
    message: str


@record
class NetPluginVersion(Record):
    """``NET/OFI Using aws-ofi-nccl 1.4.0aws``, ``NET/OFI Using Libfabric version 1.18``."""

    KIND: ClassVar[str] = "net_plugin_version"
    plugin: str
    component: str
    version: str


@record
class NetPluginEnvSet(Record):
    """``NET/OFI Setting FI_EFA_FORK_SAFE environment variable to 1`` and ``NET/OFI Running on p4d.24xlarge
    platform, Setting NCCL_TOPO_FILE environment variable to …``: settings a plugin makes itself."""

    KIND: ClassVar[str] = "net_plugin_env_set"
    plugin: str
    platform: str | None = None
    variable: str
    value: str


@record
class NetPluginOptionUnsupported(Record):
    """aws-ofi-nccl ``NET/OFI Setting FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES not
    supported.``: the endpoint does not keep 128-byte stores in order, so LL/LL128 are unsafe on it
    (the plugin then sets ``NCCL_PROTO`` to simple unless the user set it)."""

    KIND: ClassVar[str] = "net_plugin_option_unsupported"
    plugin: str
    option: str


@record
class SharpInitialized(Record):
    """nccl-rdma-sharp-plugins ``SHARP rank 1/4 initialized on mlx5_4:1``: this rank's SHARP
    context is up on those devices. The ``SHARP`` spelling is printed after ``sharp_coll_init``
    succeeded (``confirmed``); older plugins print ``Sharp rank …`` before checking, so a ``SHARP coll
    init error`` may follow it. The SHARP group (``SHARP group create``) is made after this line."""

    KIND: ClassVar[str] = "sharp_initialized"
    rank: int
    nranks: int
    sharp_devices: str
    confirmed: bool = False


@record
class SharpDatatypesUnsupported(Record):
    """WARN ``SHARP int8,uint8,bfloat16 Datatypes not supported`` (sharp_plugin.c): the SHARP
    devices lack these types, so CollNet does not reduce them (NCCL uses rings and trees for
    them). A limit, not a failure: the other types still go through SHARP."""

    KIND: ClassVar[str] = "sharp_datatypes_unsupported"
    datatypes: str


@record
class NetPluginError(Record):
    """``NET/OFI OFI NCCL failure: 2``."""

    KIND: ClassVar[str] = "net_plugin_error"
    plugin: str
    code: int


@record
class NetPluginMessage(Record):
    """Any other line an external net plugin prints through NCCL: ``NET/OFI Creating one domain per
    process``. Kept as text: these lines carry no diagnosis of their own."""

    KIND: ClassVar[str] = "net_plugin_message"
    plugin: str
    message: str


@record
class TcpxTimeout(Record):
    """GPUDirect-TCPX WARN ``0x…:0x…, nic 0, enp12s0, 172.16.0.11<39187><-172.16.0.95<46723> rx rx
    ctrl timeout cnt 7331502, nanos 10000000585``: the peer did not answer on that NIC."""

    KIND: ClassVar[str] = "tcpx_timeout"
    nic: int
    interface_name: str
    local: str
    local_port: int
    peer: str
    peer_port: int
    what: str
    count: int
    nanos: int


# --- GPU Direct RDMA ------------------------------------------------------------------------------


@record
class GdrPath(Record):
    """``GPU Direct RDMA Enabled for GPU 1b000 / HCA 0 (distance 3 <= 4), read 1`` (NET): the GDR
    decision for one GPU/NIC pair. ``distance`` and ``threshold`` are PATH_* codes, whose numbers
    changed between versions (nccl-log-format.md §3.7)."""

    KIND: ClassVar[str] = "gdr_path"
    #: ``IB``/``Socket``/a plugin name, when the line names it (<= 2.5)
    net: str | None = None
    enabled: bool = False
    #: as printed: a busId (2.5-2.23), a device index (2.24+), ``dev[nvml]`` (2.4), ``0-1`` (2.29)
    gpu: str
    gpu_rank: int | None = None
    hca: str
    #: 2.4 names the HCA too: ``HCA 0 'mlx5_0'``
    hca_name: str | None = None
    distance: int | None = None
    threshold: int | None = None
    read: int | None = None
    #: ``Default``, ``PCI`` (2.26+)
    mode: str | None = None
    pxn_via: str | None = None
    #: 2.3 prints a reason instead of a distance
    reason: str | None = None


@record
class GdrHca(Record):
    """``NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)`` (2.5-2.12) and ``NET/IB :
    GPU Direct RDMA Enabled for HCA 1 'mlx5_1'`` (2.13+): whether the HCA can do GDR at all
    (nvidia-peermem / nv_peer_mem loaded, or DMA-BUF)."""

    KIND: ClassVar[str] = "gdr_hca"
    net: str
    enabled: bool = False
    hca_index: int
    hca_name: str
    reason: str | None = None


@record
class DmaBufAvailable(Record):
    """``DMA-BUF is available on GPU device 0`` (2.13+)."""

    KIND: ClassVar[str] = "dma_buf_available"
    cuda_dev: int


@record
class IbDataDirect(Record):
    """``NET/IB: Data Direct DMA Interface is detected for device mlx5_0`` (2.27+)."""

    KIND: ClassVar[str] = "ib_data_direct"
    device: str


@record
class GdrcopyEnabled(Record):
    """``GDRCOPY enabled library 2.4 driver 2.4`` (2.9.6+)."""

    KIND: ClassVar[str] = "gdrcopy_enabled"
    library_version: str
    driver_version: str


# --- socket errors --------------------------------------------------------------------------------


@record
class SocketConnectFailed(Record):
    """``socketStartConnect: Connect to 10.0.0.12<39017> failed : No route to host``: this rank could
    not reach that address (all spellings from ``Connect to …`` to ``ncclOsSocketPollConnect: …``)."""

    KIND: ClassVar[str] = "socket_connect_failed"
    function: str | None = None
    peer: str | None = None
    peer_port: int | None = None
    error: str | None = None
    #: ``socketPollConnect … returned %d(%s) errno %d(%s)`` and ``poll() returned %d``
    returned: int | None = None
    errno: int | None = None


@record
class SocketConnectRetry(Record):
    """``socketPollConnect: connect to 10.0.0.12<39017> returned Connection refused, retrying (5/34)
    after sleep for 500 msec`` and ``Call to connect returned Connection timed out, retrying``."""

    KIND: ClassVar[str] = "socket_connect_retry"
    function: str | None = None
    peer: str | None = None
    peer_port: int | None = None
    error: str
    attempt: int | None = None
    max_attempts: int | None = None
    sleep_ms: int | None = None


@record
class SocketConnectGiveUp(Record):
    """``socketPollConnect: exceeded timeouts (35)``, ``…: connect returned Connection refused,
    exceeded error retry count (35)``: NCCL stopped retrying a connection."""

    KIND: ClassVar[str] = "socket_connect_give_up"
    function: str
    peer: str | None = None
    peer_port: int | None = None
    error: str | None = None
    #: ``retries``, ``timeouts`` or ``error retry count``
    limit: str
    count: int


@record
class SocketPeerClosed(Record):
    """``socketProgress: Connection closed by remote peer gpu-a02<36211>``: the other process went
    away first; its log has the cause."""

    KIND: ClassVar[str] = "socket_peer_closed"
    function: str | None = None
    peer: str | None = None
    peer_port: int | None = None


@record
class SocketIoFailed(Record):
    """``socketProgressOpt: Call to recv from 10.0.0.12<36211> failed : Connection reset by peer``."""

    KIND: ClassVar[str] = "socket_io_failed"
    function: str | None = None
    #: ``recv`` or ``send``
    operation: str
    peer: str | None = None
    peer_port: int | None = None
    error: str


@record
class SocketMessageTruncated(Record):
    """``NET/Socket : peer 10.0.0.12<36211> message truncated : receiving 1048576 bytes instead of
    65536. …``: ranks disagree on a collective's size or on NCCL_PROTO/NCCL_ALGO."""

    KIND: ClassVar[str] = "socket_message_truncated"
    peer: str | None = None
    peer_port: int | None = None
    received: int
    expected: int


@record
class SocketHandshakeFailed(Record):
    """``socketFinalizeAccept: wrong magic 0 != 3f5e…`` and the 2.30.7 ``… socket magic mismatch
    (peer 0x… != expected 0x…), discarding peer connection``: something that is not this NCCL job
    connected (a port scanner, another job or NCCL version)."""

    KIND: ClassVar[str] = "socket_handshake_failed"
    function: str
    peer: str | None = None
    peer_port: int | None = None
    #: the phrase NCCL used: ``magic``, ``type``, ``socket magic mismatch``, ``wrong socket type``, …
    reason: str
    got: str | None = None
    expected: str | None = None


@record
class SocketHandshakeMagic(Record):
    """``Socket handshake magic 0x3f5e… (default)`` (ENV, 2.30.7)."""

    KIND: ClassVar[str] = "socket_handshake_magic"
    magic: int
    #: where the magic came from (``default``, ``NCCL_SOCKET_MAGIC``…), as printed
    magic_source: str


@record
class NoInterfaceFound(Record):
    """``Bootstrap : no socket interface found``, ``NET/Socket : No usable listening interface
    found``, ``Net : No interface found in the same subnet as remote address …``, ``no device found
    matching =eth9, verify NCCL_OOB_NET_IFNAME``: no interface passed NCCL_SOCKET_IFNAME (or its
    OOB twin), or none shares a subnet with NCCL_COMM_ID."""

    KIND: ClassVar[str] = "no_interface_found"
    #: ``Bootstrap``, ``NET/Socket``, ``Net``, ``NET/IB``, as printed
    component: str | None = None
    remote_address: str | None = None
    #: ``matching`` or ``after excluding`` and the NCCL_OOB_NET_IFNAME filter
    filter_how: str | None = None
    filter: str | None = None


@record
class NetComponentMessage(Record):
    """Any other ``NET/IB``, ``NET/Socket`` or ``NET/MLX5`` line (allocation failures, resiliency
    chatter, vNIC bookkeeping): the component and the text."""

    KIND: ClassVar[str] = "net_component_message"
    component: str
    message: str


# --- IB errors ------------------------------------------------------------------------------------


@record
class IbCompletionError(Record):
    """``NET/IB: Got completion from peer 10.0.0.12<49152> with status=IBV_WC_RETRY_EXC_ERR(12)
    opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129  hca mlx5_0``: a work request failed on the fabric.
    ``status`` is ``ibv_wc_status`` (enums.IBV_WC_STATUS); ``opcode`` is undefined when it is not 0."""

    KIND: ClassVar[str] = "ib_completion_error"
    #: ``NET/IB/GIN`` (2.28.7+)
    gin: bool = False
    peer: str | None = None
    peer_port: int | None = None
    status: int
    status_name: str | None = None
    opcode: int
    opcode_name: str | None = None
    length: int | None = None
    vendor_err: int
    #: ``Send``, ``Recv``, ``Flush``, ``IPut`` …
    request_type: str | None = None
    #: RoCE only
    local_gid: str | None = None
    remote_gid: str | None = None
    hca: str | None = None


@record
class IbAsyncEvent(Record):
    """``NET/IB : mlx5_0:1 Got async event : port error`` and the later ``async fatal event`` lines:
    the HCA reported a port, QP or CQ event."""

    KIND: ClassVar[str] = "ib_async_event"
    device: str | None = None
    port: int | None = None
    fatal: bool = False
    #: ``QP``, ``CQ``, ``SRQ`` for ``async fatal event on …``
    target: str | None = None
    object: str | None = None
    event: str | None = None
    event_code: int | None = None


@record
class IbSizeMismatch(Record):
    """``NET/IB : req 1/1 tag 7 peer 10.0.0.12<49152> collective mismatch error, local size 65536
    remote size 1024`` and ``… posted incorrect receive info: size 1024 …``: ranks disagree on the
    size of a transfer."""

    KIND: ClassVar[str] = "ib_size_mismatch"
    request: int | None = None
    nreqs: int | None = None
    tag: int | None = None
    peer: str | None = None
    peer_port: int | None = None
    local_size: int | None = None
    remote_size: int | None = None
    posted_size: int | None = None


@record
class IbPostFailed(Record):
    """``ibv_post_send() failed with error Cannot allocate memory, Bad WR 0x…, First WR 0x…``."""

    KIND: ClassVar[str] = "ib_post_failed"
    #: ``ibv_post_send()`` or ``ibv_post_recv()``
    verb: str
    error: str


@record
class Mlx5CallFailed(Record):
    """``NET/MLX5: Call to mlx5dv_get_data_direct_sysfs_path failed with error Operation not
    supported`` (2.28+)."""

    KIND: ClassVar[str] = "mlx5_call_failed"
    call: str
    error: str | None = None
    errno: int | None = None


@record
class IbDeviceError(Record):
    """``NET/IB : Unable to open device mlx5_2``, ``… Unable to query port_num 1``."""

    KIND: ClassVar[str] = "ib_device_error"
    #: ``open`` or ``query``
    action: str
    #: the device name, or the port number for the port lines
    device: str


@record
class SocketError(Record):
    """``ncclSocketRecv: socket state (4) is not ready``, ``Net : No valid [IPv6]:port pair found``,
    ``socketTryAccept: Accept failed: Too many open files``: NCCL's socket layer refused or failed an
    operation that is not a connect, a transfer or a handshake."""

    KIND: ClassVar[str] = "socket_error"
    #: the function that printed it (None for the ``Net :`` spellings, 2.3-2.15)
    function: str | None = None
    #: fixed-text refusals: ``pass NULL socket``, ``file descriptor is -1``, ``socket is invalid``,
    #: ``No valid [IPv6]:port pair found``, ``unsupported IP family``, …
    sock_problem: str | None = None
    #: the strerror/gai_strerror text of a failed socket(), accept() or getaddrinfo()
    error: str | None = None
    #: ncclSocketState value(s) the call found (``socket state (%d/%d)`` gives two)
    state: tuple[int, ...] = ()
    #: an address NCCL was asked to connect to with an unknown family, and that family
    address: str | None = None
    family: int | None = None
    index: int | None = None
    errno: int | None = None


@record
class IbSidebandInterface(Record):
    """``NET/IB : Using interface ib0 for sideband communication`` (2.3): the IB OOB interface."""

    KIND: ClassVar[str] = "ib_sideband_interface"
    sideband_interface: str


RECORD_TYPES = (
    IbSidebandInterface,
    SocketError,
    NetInterface,
    IbDevice,
    IbMergedDevice,
    UsingNetwork,
    BootstrapInterfaces,
    BootstrapOobNet,
    SocketInterfaces,
    SocketThreads,
    InterfaceSpeed,
    InterfaceInSubnet,
    IbDevices,
    IbNoDevice,
    IbDeviceDetail,
    IbVirtualDevice,
    IbQpInfo,
    LibraryOpenFailed,
    DlsymFailed,
    NicDistance,
    PluginNotFound,
    PluginLoadFailed,
    PluginLoaded,
    PluginInternal,
    PluginSymbolMissing,
    PluginInitialized,
    PluginInitFailed,
    PluginAssigned,
    PluginUnsupported,
    PluginsDisabled,
    PluginEnvName,
    PluginClosed,
    NetPluginDeviceApi,
    NetworkNotFound,
    PluginPath,
    PxnDisabledPlugin,
    OfiProviderSelected,
    NetPluginProviderNotFound,
    NetPluginVersion,
    NetPluginEnvSet,
    NetPluginOptionUnsupported,
    SharpInitialized,
    SharpDatatypesUnsupported,
    NetPluginError,
    NetPluginMessage,
    TcpxTimeout,
    GdrPath,
    GdrHca,
    DmaBufAvailable,
    IbDataDirect,
    GdrcopyEnabled,
    SocketConnectFailed,
    SocketConnectRetry,
    SocketConnectGiveUp,
    SocketPeerClosed,
    SocketIoFailed,
    SocketMessageTruncated,
    SocketHandshakeFailed,
    SocketHandshakeMagic,
    NoInterfaceFound,
    NetComponentMessage,
    IbCompletionError,
    IbAsyncEvent,
    IbSizeMismatch,
    IbPostFailed,
    Mlx5CallFailed,
    IbDeviceError,
)
