"""Version banner, driver version, and settings NCCL reports it read (grammar/families/version_env.lark)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ncclscope.model.records.base import Record


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionBanner(Record):
    """``NCCL version 2.18.5+cuda12.2``: the NCCL build and the CUDA it was compiled against."""

    KIND: ClassVar[str] = "version_banner"
    nccl_version: str
    cuda_version: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GitVersion(Record):
    """``NCCL git version <branch> <describe>`` (2.29.2+)."""

    KIND: ClassVar[str] = "git_version"
    git_branch: str
    git_describe: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaDriverVersion(Record):
    """``cudaDriverVersion 12040``: the driver's CUDA version as 1000*major+10*minor."""

    KIND: ClassVar[str] = "cuda_driver_version"
    cuda_driver: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvSetting(Record):
    """``NCCL_IB_HCA set by environment to mlx5_0`` and its spellings: a setting NCCL read.

    Values from /etc/nccl.conf and ~/.nccl.conf print the same way: NCCL loads those files into
    its environment before reading its parameters."""

    KIND: ClassVar[str] = "env_setting"
    name: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvInvalid(Record):
    """``Invalid value X for NCCL_Y, using default Z.``: a setting NCCL ignored."""

    KIND: ClassVar[str] = "env_invalid"
    value: str
    name: str
    default: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CommConfig(Record):
    """``Comm config Blocking set to 1`` (2.17+) or ``Comm config maxCTAs reset to NCCL_MAX_CTAS=16``
    (2.28.7+): a communicator config field, and the environment variable that overrode it."""

    KIND: ClassVar[str] = "comm_config"
    field: str
    value: str | None = None
    env_assignment: str | None = None


RECORD_TYPES = (VersionBanner, GitVersion, CudaDriverVersion, EnvSetting, EnvInvalid, CommConfig)
