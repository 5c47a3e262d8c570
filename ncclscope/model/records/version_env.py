"""Version banner, driver version, and settings NCCL reports it read (grammar/families/version_env.lark)."""

from __future__ import annotations

from typing import ClassVar

from ncclscope.model.records.base import Record, record


@record
class VersionBanner(Record):
    """``NCCL version 2.18.5+cuda12.2``: the NCCL build and the CUDA it was compiled against."""

    KIND: ClassVar[str] = "version_banner"
    nccl_version: str
    cuda_version: str | None = None


@record
class GitVersion(Record):
    """``NCCL git version <branch> <describe>`` (2.29.2+)."""

    KIND: ClassVar[str] = "git_version"
    git_branch: str
    git_describe: str


@record
class CudaDriverVersion(Record):
    """``cudaDriverVersion 12040``: the driver's CUDA version as 1000*major+10*minor."""

    KIND: ClassVar[str] = "cuda_driver_version"
    cuda_driver: int


@record
class EnvSetting(Record):
    """``NCCL_IB_HCA set by environment to mlx5_0`` and its spellings: a setting NCCL read.

    Values from /etc/nccl.conf and ~/.nccl.conf print the same way: NCCL loads those files into
    its environment before reading its parameters."""

    KIND: ClassVar[str] = "env_setting"
    name: str
    value: str


@record
class EnvInvalid(Record):
    """``Invalid value X for NCCL_Y, using default Z.``: a setting NCCL ignored."""

    KIND: ClassVar[str] = "env_invalid"
    value: str
    name: str
    default: str


@record
class CommConfig(Record):
    """``Comm config Blocking set to 1`` (2.17+) or ``Comm config maxCTAs reset to NCCL_MAX_CTAS=16``
    (2.28.7+): a communicator config field, and the environment variable that overrode it."""

    KIND: ClassVar[str] = "comm_config"
    field: str
    value: str | None = None
    env_assignment: str | None = None


@record
class ConfigInvalid(Record):
    """``Invalid config blocking attribute value 2``, ``NCCL_MAX_CTAS 0 is too low, leaving it set at
    1``, ``minCTAs 64 is larger than maxCTAs 32, set both to 32``: a setting (environment variable or
    ``ncclConfig_t`` field) NCCL rejected or clamped, and what it used instead."""

    KIND: ClassVar[str] = "config_invalid"
    #: the config field (``blocking``, ``minCTAs``) or variable name (``NCCL_MAX_CTAS``)
    config_name: str | None = None
    #: the variable name when NCCL printed a ``NCCL_*`` one first
    name: str | None = None
    #: the rejected value(s); ``min/max channels`` gives two
    config_value: tuple[str, ...] = ()
    #: the value NCCL uses instead, when it says
    adjusted_to: int | None = None
    #: the bound that was crossed: ``#channels upper limit``, ``maxCTAs``
    limit_name: str | None = None
    limit: int | None = None
    #: ``is too low``, ``is not valid``, ``maximum``, ``minimum``, ``must be a multiple of``
    reason: str | None = None
    #: a child communicator's parent value that does not match (2.28.7+)
    parent_value: str | None = None


RECORD_TYPES = (
    VersionBanner,
    GitVersion,
    CudaDriverVersion,
    EnvSetting,
    EnvInvalid,
    CommConfig,
    ConfigInvalid,
)
