"""Progress of long jobs, for people and for logs (SPEC §2.11): one helper for every job
(``index``, ``eval``, the server's background work).

On a terminal each task is a rich bar (count, rate, time left) redrawn four times a second,
so it moves at least every second even while a count stands still. Anywhere else (a log
file, CI, systemd, a server) it writes one plain line per running task every few seconds:

    index docs: 1,200/10,000 files (12%), 240 files/s, about 37 s left

and a last line when the job ends. Lines go to a stream (stderr by default) or to a logger.

Three modules: ``job`` (a job's tasks, as bars or periodic lines), ``lines`` (the plain line
itself, and ``RoundLog`` for work in rounds) and ``rate`` (the smoothed rate behind the
time left). A leaf package: it imports nothing else of Guaipeca's.
"""

from guaipeca.progress.job import JobProgress, ProgressTask
from guaipeca.progress.lines import PLAIN_INTERVAL_SECONDS, RoundLog, plain_line
from guaipeca.progress.rate import RateMeter

__all__ = [
    "PLAIN_INTERVAL_SECONDS",
    "JobProgress",
    "ProgressTask",
    "RateMeter",
    "RoundLog",
    "plain_line",
]
