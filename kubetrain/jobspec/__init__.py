"""The job model: pure data, loading and validation. Imports nothing else of kubetrain."""

from .errors import FieldError, SpecError, format_path
from .frameworks import ROLES, Framework
from .load import from_dict, load_all_files, load_file, load_text
from .model import (
    API_VERSION,
    KIND,
    DistributedConfig,
    Elastic,
    ExitCodes,
    JobSpec,
    Metadata,
    Mpi,
    Port,
    ReplicaSettings,
    RoleSpec,
    Run,
    RunPolicy,
    Scheduling,
    Security,
    TrainJob,
)
from .resources import GpuSharing, Resources

__all__ = [
    "API_VERSION",
    "KIND",
    "ROLES",
    "DistributedConfig",
    "Elastic",
    "ExitCodes",
    "FieldError",
    "Framework",
    "GpuSharing",
    "JobSpec",
    "Metadata",
    "Mpi",
    "Port",
    "ReplicaSettings",
    "Resources",
    "RoleSpec",
    "Run",
    "RunPolicy",
    "Scheduling",
    "Security",
    "SpecError",
    "TrainJob",
    "format_path",
    "from_dict",
    "load_all_files",
    "load_file",
    "load_text",
]
