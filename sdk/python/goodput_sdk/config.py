"""Where reports go and which job they belong to, from arguments or the environment.

Explicit arguments win; otherwise the environment of the job decides, so that a Slurm or Osmo
job gets a working reporter without code changes:

  GOODPUT_ENDPOINT   the MfuService address: host:port (plaintext), http://host:port,
                     https://host[:port] (TLS with the system roots)
  GOODPUT_TLS_CA     for https:// endpoints: the CA that signed the service's certificate
                     (PEM file) instead of the system roots
  GOODPUT_TLS_CERT, GOODPUT_TLS_KEY  a client certificate and key (PEM files), when the
                     service requires client certificates (mTLS)
  GOODPUT_TOKEN      bearer token with the `sdk` role (optional when authentication is off)
  GOODPUT_CLUSTER    cluster name as the scheduler registers it; else SLURM_CLUSTER_NAME
  GOODPUT_JOB_ID     job id as the scheduler registers it; else the Slurm job id
                     (SLURM_ARRAY_JOB_ID_SLURM_ARRAY_TASK_ID for an array task, SLURM_JOB_ID
                     otherwise), else OSMO_WORKFLOW_ID
  GOODPUT_REPORT_RANKS  which ranks of a multi-process job report: "0" (default), "all", or
                     a comma-separated list; the rank is RANK (torchrun), else SLURM_PROCID,
                     else OMPI_COMM_WORLD_RANK, else PMI_RANK; a process with none reports
"""

import dataclasses
import os
from typing import Mapping, Optional, Tuple

ENDPOINT_ENV = "GOODPUT_ENDPOINT"
TOKEN_ENV = "GOODPUT_TOKEN"
CLUSTER_ENV = "GOODPUT_CLUSTER"
JOB_ID_ENV = "GOODPUT_JOB_ID"
REPORT_RANKS_ENV = "GOODPUT_REPORT_RANKS"
TLS_CA_ENV = "GOODPUT_TLS_CA"
TLS_CERT_ENV = "GOODPUT_TLS_CERT"
TLS_KEY_ENV = "GOODPUT_TLS_KEY"
# Global rank variables of the launchers, most specific first.
RANK_ENVS = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Resolved reporter settings. Empty strings mean "not configured"."""

    endpoint: str
    token: str
    cluster: str
    job_id: str
    tls_ca_file: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""


@dataclasses.dataclass(frozen=True)
class Target:
    """A parsed endpoint: the gRPC target string and whether to use TLS."""

    address: str
    tls: bool


def job_id_from_environment(environ: Mapping[str, str]) -> str:
    """The job id a scheduler exposes to the job's processes, or "" when there is none."""
    explicit = environ.get(JOB_ID_ENV, "").strip()
    if explicit:
        return explicit
    array_job = environ.get("SLURM_ARRAY_JOB_ID", "").strip()
    array_task = environ.get("SLURM_ARRAY_TASK_ID", "").strip()
    if array_job and array_task:
        return f"{array_job}_{array_task}"
    slurm = environ.get("SLURM_JOB_ID", "").strip() or environ.get("SLURM_JOBID", "").strip()
    if slurm:
        return slurm
    return environ.get("OSMO_WORKFLOW_ID", "").strip()


def cluster_from_environment(environ: Mapping[str, str]) -> str:
    """The cluster name from GOODPUT_CLUSTER or SLURM_CLUSTER_NAME, or ""."""
    return (environ.get(CLUSTER_ENV, "").strip()
            or environ.get("SLURM_CLUSTER_NAME", "").strip())


def resolve(endpoint: Optional[str] = None,
            job: Optional[str] = None,
            token: Optional[str] = None,
            cluster: Optional[str] = None,
            environ: Optional[Mapping[str, str]] = None) -> Settings:
    """Fills every argument left as None from `environ` (default: os.environ)."""
    env = os.environ if environ is None else environ
    return Settings(
        endpoint=(endpoint if endpoint is not None else env.get(ENDPOINT_ENV, "")).strip(),
        token=(token if token is not None else env.get(TOKEN_ENV, "")).strip(),
        cluster=(cluster if cluster is not None else cluster_from_environment(env)).strip(),
        job_id=(job if job is not None else job_id_from_environment(env)).strip(),
        tls_ca_file=env.get(TLS_CA_ENV, "").strip(),
        tls_cert_file=env.get(TLS_CERT_ENV, "").strip(),
        tls_key_file=env.get(TLS_KEY_ENV, "").strip(),
    )


def tls_file_contents(settings: Settings) -> Tuple[Optional[bytes], Optional[bytes], Optional[bytes]]:
    """(root certificates, private key, certificate chain) for grpc.ssl_channel_credentials
    from the TLS files of `settings`; None where a file is not configured. Raises ValueError
    naming the variable and the file when one cannot be read."""
    def read(variable, path):
        if not path:
            return None
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as e:
            raise ValueError(f"{variable}={path!r} cannot be read: {e.strerror}") from None
    if bool(settings.tls_cert_file) != bool(settings.tls_key_file):
        raise ValueError(f"{TLS_CERT_ENV} and {TLS_KEY_ENV}: set both or neither")
    return (read(TLS_CA_ENV, settings.tls_ca_file), read(TLS_KEY_ENV, settings.tls_key_file),
            read(TLS_CERT_ENV, settings.tls_cert_file))


def parse_endpoint(endpoint: str) -> Target:
    """"host:port", "http://host:port" -> plaintext; "https://host[:port]" -> TLS (port 443
    by default). Raises ValueError naming the endpoint when it has no host."""
    value = endpoint.strip()
    tls = False
    if value.startswith("https://"):
        tls = True
        value = value[len("https://"):]
    elif value.startswith("http://"):
        value = value[len("http://"):]
    value = value.rstrip("/")
    if not value or value.startswith(":") or "/" in value and not value.startswith(
            ("dns:", "unix:", "ipv4:", "ipv6:")):
        raise ValueError(f"endpoint={endpoint!r} is not host:port, http://host:port or "
                         "https://host[:port]")
    if tls and ":" not in value.rsplit("]", 1)[-1]:
        value += ":443"
    return Target(address=value, tls=tls)


def rank_from_environment(environ: Mapping[str, str]) -> Optional[int]:
    """The process's global rank from its launcher's environment, or None for a single process.

    LOCAL_RANK alone is not a global rank (every node has a local rank 0) and is not used.
    """
    for name in RANK_ENVS:
        value = environ.get(name, "").strip()
        if value:
            try:
                rank = int(value)
            except ValueError:
                continue
            if rank >= 0:
                return rank
    return None


def should_report(ranks: Optional[str], environ: Mapping[str, str]) -> Tuple[bool, str]:
    """Whether this process reports, and why not.

    `ranks` is "0", "all" or "0,8,16" (None: GOODPUT_REPORT_RANKS, default "0"). A ValueError
    names a malformed value.
    """
    spec = (ranks if ranks is not None else environ.get(REPORT_RANKS_ENV, "0")).strip().lower()
    rank = rank_from_environment(environ)
    if spec in ("all", "*") or rank is None:
        return True, ""
    try:
        allowed = {int(part) for part in spec.split(",") if part.strip()}
    except ValueError:
        raise ValueError(f"{REPORT_RANKS_ENV}={spec!r} is not 'all' or a list of ranks") from None
    if rank in allowed:
        return True, ""
    return False, (f"this process is rank {rank} and reports come from rank(s) {spec} only "
                   f"(set {REPORT_RANKS_ENV}=all to report from every rank)")
