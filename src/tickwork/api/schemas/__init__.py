"""API schemas: request bodies (``create``), responses (``read``) and the error shape."""

from tickwork.api.schemas.create import JobBatchCreate, JobCreate, TriggerIn
from tickwork.api.schemas.error import ErrorDetail, ErrorItem, ErrorRead
from tickwork.api.schemas.read import (
    FiresRead,
    HealthRead,
    JobPageRead,
    JobRead,
    LogsRead,
    RunDetailRead,
    RunPageRead,
    RunRead,
)

__all__ = [
    "ErrorDetail",
    "ErrorItem",
    "ErrorRead",
    "FiresRead",
    "HealthRead",
    "JobBatchCreate",
    "JobCreate",
    "JobPageRead",
    "JobRead",
    "LogsRead",
    "RunDetailRead",
    "RunPageRead",
    "RunRead",
    "TriggerIn",
]
