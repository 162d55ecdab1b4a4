"""Client of the SERP / keyword-data provider (DataForSEO-shaped queued task API).

Usage::

    client = SerpClient(base_url, login, password)
    posted = await client.post_serp_tasks([SerpTask(tag=str(run_id), keyword="shoes", ...)])
    for ready in await client.serp_tasks_ready():
        result = await client.get_serp_task(ready.task_id)

The loopback simulator of this API is :mod:`app.sandbox.serp`.
"""

from app.integrations.serp.client import (
    KEYWORD_DATA_PATH,
    MAX_KEYWORDS_PER_TASK,
    MAX_TASKS_PER_POST,
    SERP_PATH,
    SerpClient,
)
from app.integrations.serp.codes import TaskState, is_transient, task_state
from app.integrations.serp.errors import (
    AuthenticationFailed,
    InvalidRequest,
    PaymentRequired,
    ProviderError,
    RateLimited,
    TransientProviderError,
)
from app.integrations.serp.maps import (
    MAPS_PATH,
    MapsListing,
    MapsTask,
    MapsTaskResult,
    maps_coordinate,
)
from app.integrations.serp.structs import (
    KeywordDataResult,
    KeywordDataTask,
    KeywordVolume,
    MonthlySearch,
    PostedTask,
    ReadyTask,
    SerpItem,
    SerpSource,
    SerpTask,
    SerpTaskResult,
)

__all__ = [
    "KEYWORD_DATA_PATH",
    "MAPS_PATH",
    "MAX_KEYWORDS_PER_TASK",
    "MAX_TASKS_PER_POST",
    "SERP_PATH",
    "AuthenticationFailed",
    "InvalidRequest",
    "KeywordDataResult",
    "KeywordDataTask",
    "KeywordVolume",
    "MapsListing",
    "MapsTask",
    "MapsTaskResult",
    "MonthlySearch",
    "PaymentRequired",
    "PostedTask",
    "ProviderError",
    "RateLimited",
    "ReadyTask",
    "SerpClient",
    "SerpItem",
    "SerpSource",
    "SerpTask",
    "SerpTaskResult",
    "TaskState",
    "TransientProviderError",
    "is_transient",
    "maps_coordinate",
    "task_state",
]
