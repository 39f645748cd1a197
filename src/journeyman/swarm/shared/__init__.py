"""What the workers of a swarm share: failures and references (`SharedContextState`), call
repeats across workers (`SharedEconomicsState`), each worker's caps on its loop's own limits
(`WorkerBudgetConfig`), the workers' system prompts (`SharedContextEngine`), and where all of
it is kept between processes and machines (`PersistenceAdapter` and its implementations)."""

from journeyman.swarm.shared.checkpoint import (
    load_shared_state,
    save_shared_state,
    sync_shared_state,
)
from journeyman.swarm.shared.context_state import (
    SharedContextConfig,
    SharedContextState,
    WorkerFailure,
)
from journeyman.swarm.shared.economics_state import (
    EconomicsVerdict,
    GlobalDoomLoop,
    SharedEconomicsState,
)
from journeyman.swarm.shared.engine import (
    SharedContextEngine,
    SharedContextEngineConfig,
    WorkerTask,
)
from journeyman.swarm.shared.persistence import (
    CorruptRecordError,
    InvalidKeyError,
    JSONFilePersistenceAdapter,
    PersistenceAdapter,
    PersistenceError,
    SQLitePersistenceAdapter,
)
from journeyman.swarm.shared.redis_adapter import RedisPersistenceAdapter
from journeyman.swarm.shared.worker_budget import (
    WorkerBudgetConfig,
    call_fingerprint,
    worker_limits,
)
from journeyman.swarm.shared.worker_hooks import WorkerAttachment, attach_worker

__all__ = [
    "CorruptRecordError",
    "EconomicsVerdict",
    "GlobalDoomLoop",
    "InvalidKeyError",
    "JSONFilePersistenceAdapter",
    "PersistenceAdapter",
    "PersistenceError",
    "RedisPersistenceAdapter",
    "SQLitePersistenceAdapter",
    "SharedContextConfig",
    "SharedContextEngine",
    "SharedContextEngineConfig",
    "SharedContextState",
    "SharedEconomicsState",
    "WorkerAttachment",
    "WorkerBudgetConfig",
    "WorkerFailure",
    "WorkerTask",
    "attach_worker",
    "call_fingerprint",
    "load_shared_state",
    "save_shared_state",
    "sync_shared_state",
    "worker_limits",
]
