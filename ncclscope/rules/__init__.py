"""The rule registry: an explicit, greppable list, one module per rule named by its id.

A rule lives in ``ncclscope/rules/<prefix>/<id>_<name>.py``: its check (whose docstring is its
documentation, remediation included), its metadata (``RULE = Rule(...)``). Helpers shared by a
package's rules sit in its ``_shared.py``, those shared across packages in ``rules/_*.py``.

To add a rule: write its module, import it below and add it to ``_MODULES``, add a case file
tests/cases/rules/<ID>.yaml, and run ``python -m ncclscope.docs``.
"""

from __future__ import annotations

from types import ModuleType

from ncclscope.errors import UsageError
from ncclscope.rules.base import Category, Finding, Rule, Severity
from ncclscope.rules.boot import (
    boot001_bootstrap_protocol_error,
    boot002_socket_connect_failed,
    boot003_failed_while_forming,
)
from ncclscope.rules.bw import bw001_bandwidth_far_below_links
from ncclscope.rules.env import (
    env001_notable_env_override,
    env002_setting_differs_across_ranks,
    env003_forced_ll128_protocol,
)
from ncclscope.rules.err import (
    err001_cuda_failure,
    err002_out_of_memory,
    err003_cuda_driver_or_nvml_error,
    err004_remote_error,
    err005_duplicate_gpu,
    err006_first_error,
    err007_fabric_manager_not_ready,
)
from ncclscope.rules.fr import fr101_flight_recorder_divergence
from ncclscope.rules.graph import (
    graph101_graph_nic_path_through_cpu,
    graph102_fewer_channels_than_nics,
)
from ncclscope.rules.hang import (
    hang001_collective_timeout,
    hang002_rank_stuck_in_init,
    hang003_rank_behind_in_collectives,
    hang004_slow_init_host,
    hang005_slow_communicator_init,
    hang006_job_killed_by_scheduler,
)
from ncclscope.rules.hint import hint001_nccl_hint
from ncclscope.rules.ib import (
    ib001_ib_completion_error,
    ib002_ib_async_error_event,
    ib003_ib_verbs_call_failed,
    ib004_gpu_direct_rdma_disabled,
    ib005_roce_link_local_gid,
    ib006_ib_mtu_differs_across_hosts,
    ib007_dmabuf_registration_refused,
    ib008_verbs_locked_memory_limit,
)
from ncclscope.rules.insp import insp101_inspector_straggler_rank
from ncclscope.rules.net import (
    net001_inter_node_traffic_over_sockets,
    net002_ib_present_but_unused,
    net003_ethernet_speed_inter_node_graph,
    net004_ib_no_device_found,
    net005_libibverbs_missing,
    net006_net_plugin_failed,
    net007_net_plugin_version_fallback,
    net008_net_plugin_no_provider,
    net009_net_plugin_transfer_timeout,
    net010_network_transfer_stalled,
    net011_requested_network_not_found,
    net012_suspicious_bootstrap_interface,
    net013_socket_transport_on_virtual_interface,
    net014_interfaces_differ_across_hosts,
    net015_no_matching_interface,
    net016_fabric_net_plugin_not_loaded,
    net017_ib_hca_prefix_matches_more,
    net018_nics_differ_across_hosts,
    net019_collnet_sharp_unavailable,
    net101_virtual_interfaces_as_nics,
)
from ncclscope.rules.nvls import (
    nvls001_nvls_setup_failed,
    nvls002_mnnvl_not_working,
    nvls003_nvls_multicast_unavailable,
)
from ncclscope.rules.p2p import (
    p2p001_p2p_disabled_between_connected_gpus,
    p2p002_intra_node_shm_instead_of_p2p,
    p2p003_all_shm_node,
    p2p004_p2p_disabled_by_environment,
    p2p005_acs_iommu_blocks_p2p,
    p2p006_net_between_ranks_of_one_host,
    p2p007_net_between_containers_of_one_machine,
)
from ncclscope.rules.prof import prof101_profiler_operation_never_ended
from ncclscope.rules.ras import (
    ras001_ras_not_working,
    ras101_ras_dead_or_missing_ranks,
    ras102_ras_op_count_gap,
)
from ncclscope.rules.shm import (
    shm001_dev_shm_too_small,
    shm002_shm_transport_failed,
    shm003_cumem_host_shm_failed,
)
from ncclscope.rules.test import (
    test101_nccl_tests_wrong_results,
    test102_one_rank_communicator_per_process,
)
from ncclscope.rules.topo import (
    topo001_nvlink_present_not_used,
    topo002_cpu_numa_undetected,
    topo003_gpu_nic_path_through_sys,
    topo004_topology_detection_fallback,
    topo005_low_channel_count,
    topo006_ranks_pinned_to_few_cpus,
    topo007_device_missing_from_sysfs,
    topo101_nvlink_count_asymmetric,
    topo102_gpu_and_nic_on_different_sockets,
    topo103_topology_file_not_this_machine,
    topo104_pcie_link_below_peers,
    topo105_log_transport_below_topology,
)
from ncclscope.rules.ver import (
    ver001_nccl_version_mismatch,
    ver002_nccl_too_old_for_gpu,
    ver003_peer_nccl_version_mismatch,
    ver004_cuda_driver_older_than_nccl_cuda,
)

#: the order rules run and are listed in (the order findings of one severity are reported)
_MODULES: tuple[ModuleType, ...] = (
    net001_inter_node_traffic_over_sockets,
    net002_ib_present_but_unused,
    net003_ethernet_speed_inter_node_graph,
    net004_ib_no_device_found,
    net005_libibverbs_missing,
    net006_net_plugin_failed,
    net007_net_plugin_version_fallback,
    net008_net_plugin_no_provider,
    net009_net_plugin_transfer_timeout,
    net010_network_transfer_stalled,
    net011_requested_network_not_found,
    net012_suspicious_bootstrap_interface,
    net013_socket_transport_on_virtual_interface,
    net014_interfaces_differ_across_hosts,
    net015_no_matching_interface,
    net016_fabric_net_plugin_not_loaded,
    net017_ib_hca_prefix_matches_more,
    net018_nics_differ_across_hosts,
    net019_collnet_sharp_unavailable,
    ib001_ib_completion_error,
    ib002_ib_async_error_event,
    ib003_ib_verbs_call_failed,
    ib004_gpu_direct_rdma_disabled,
    ib005_roce_link_local_gid,
    ib006_ib_mtu_differs_across_hosts,
    ib007_dmabuf_registration_refused,
    ib008_verbs_locked_memory_limit,
    err001_cuda_failure,
    err002_out_of_memory,
    err003_cuda_driver_or_nvml_error,
    err004_remote_error,
    err005_duplicate_gpu,
    err006_first_error,
    err007_fabric_manager_not_ready,
    boot001_bootstrap_protocol_error,
    boot002_socket_connect_failed,
    boot003_failed_while_forming,
    shm001_dev_shm_too_small,
    shm002_shm_transport_failed,
    shm003_cumem_host_shm_failed,
    p2p001_p2p_disabled_between_connected_gpus,
    p2p002_intra_node_shm_instead_of_p2p,
    p2p003_all_shm_node,
    p2p004_p2p_disabled_by_environment,
    p2p005_acs_iommu_blocks_p2p,
    p2p006_net_between_ranks_of_one_host,
    p2p007_net_between_containers_of_one_machine,
    topo001_nvlink_present_not_used,
    topo002_cpu_numa_undetected,
    topo003_gpu_nic_path_through_sys,
    topo004_topology_detection_fallback,
    topo005_low_channel_count,
    topo006_ranks_pinned_to_few_cpus,
    topo007_device_missing_from_sysfs,
    nvls001_nvls_setup_failed,
    nvls002_mnnvl_not_working,
    nvls003_nvls_multicast_unavailable,
    ver002_nccl_too_old_for_gpu,
    ver003_peer_nccl_version_mismatch,
    ver004_cuda_driver_older_than_nccl_cuda,
    hang001_collective_timeout,
    hang002_rank_stuck_in_init,
    hang003_rank_behind_in_collectives,
    hang004_slow_init_host,
    hint001_nccl_hint,
    hang005_slow_communicator_init,
    hang006_job_killed_by_scheduler,
    ras001_ras_not_working,
    env001_notable_env_override,
    env002_setting_differs_across_ranks,
    env003_forced_ll128_protocol,
    ver001_nccl_version_mismatch,
    bw001_bandwidth_far_below_links,
    topo101_nvlink_count_asymmetric,
    topo105_log_transport_below_topology,
    prof101_profiler_operation_never_ended,
    topo104_pcie_link_below_peers,
    graph102_fewer_channels_than_nics,
    test102_one_rank_communicator_per_process,
    topo102_gpu_and_nic_on_different_sockets,
    topo103_topology_file_not_this_machine,
    net101_virtual_interfaces_as_nics,
    graph101_graph_nic_path_through_cpu,
    test101_nccl_tests_wrong_results,
    insp101_inspector_straggler_rank,
    ras101_ras_dead_or_missing_ranks,
    ras102_ras_op_count_gap,
    fr101_flight_recorder_divergence,
)

RULES: tuple[Rule, ...] = tuple(module.RULE for module in _MODULES)


def _check_registry() -> None:
    ids: set[str] = set()
    names: set[str] = set()
    for rule in RULES:
        if rule.id in ids or rule.name in names:
            raise RuntimeError(f"rule {rule.id} {rule.name} registered twice")
        ids.add(rule.id)
        names.add(rule.name)


_check_registry()


def get(key: str) -> Rule:
    """A rule by id or name; a clear error for anything else."""
    for rule in RULES:
        if key in (rule.id, rule.name) or key.upper() == rule.id:
            return rule
    raise UsageError(f"no rule {key!r} (see `ncclscope rules`)")


__all__ = ["RULES", "Category", "Finding", "Rule", "Severity", "get"]
