"""The soak's report: what a run found, as JSON (the dataclass' fields), a short table,
and the soak's one current report (markdown, docs/soak/<store>[-<N>rs].md by default:
each run replaces it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..reports import header
from .availability import HUNG
from .beside import holds


@dataclass
class SoakReport:
    """What a soak found. The targets: wrong_answers, acked_writes_lost, half_batches,
    acked_changes_lost and half_changes 0, final_exact, check_problems empty, no unclear
    error, no hung client (requests that hung, and each fault's unavailability, are
    measured, not judged)."""

    store: str
    seconds: float
    writers: int
    readers: int
    inserts: int  # acknowledged rows
    inserts_per_s: float
    queries: int  # answers
    queries_per_s: float
    splits: int
    answers_checked: int
    wrong_answers: int
    final_exact: bool
    check_problems: list
    acked_writes_lost: int = 0  # rows of acknowledged batches missing after recovery
    half_batches: int = 0  # batches partly stored after recovery
    batches: dict = field(default_factory=dict)
    requests: dict = field(default_factory=dict)
    nemesis: dict = field(default_factory=dict)
    recovery: dict = field(default_factory=dict)
    wrong_examples: list = field(default_factory=list)
    load: str = ""  # the machine's load average when the run ended
    deleters: int = 0
    correctors: int = 0
    changes: dict = field(default_factory=dict)  # deletes and corrections acknowledged, and maybes
    acked_changes_lost: int = 0  # acknowledged deletes or corrections not in the store after recovery
    half_changes: int = 0  # batches a delete or correction left half done
    changes_wrong: list = field(default_factory=list)  # what those were
    beside: dict = field(default_factory=dict)  # the askers' figures, with --beside (beside.summary)

    @property
    def ok(self) -> bool:
        """Every target holds (and the clients got work done: a run where none could
        proves nothing)."""
        worked = (self.requests.get("acks") or not self.writers) and (self.queries or not self.readers)
        return bool(worked and self.wrong_answers == 0 and self.acked_writes_lost == 0 and self.half_batches == 0
                    and self.acked_changes_lost == 0 and self.half_changes == 0
                    and self.final_exact and not self.check_problems and not self.requests.get("unclear_errors")
                    and not self.requests.get("hung_clients") and (not self.beside or holds(self.beside)))

    def missed(self) -> list[str]:
        """The targets a run missed, in words (none: every target held)."""
        r = self.requests
        misses = {"wrong answers": self.wrong_answers, "acknowledged rows lost": self.acked_writes_lost,
                  "batches half stored": self.half_batches, "acknowledged deletes or corrections lost":
                  self.acked_changes_lost, "deletes or corrections half done": self.half_changes,
                  "problems `check` found": len(self.check_problems),
                  "unclear errors": r.get("unclear_errors", 0), "hung clients": len(r.get("hung_clients", []))}
        out = [f"{what} {n}" for what, n in misses.items() if n]
        if not self.final_exact:
            out.append("final queries not exact")
        if self.beside and not holds(self.beside):
            out.append(f"beside {self.beside['dataset']}: {self.beside['wrong']} wrong, {self.beside['refused']} "
                       f"refused, region servers: {_servers(self.beside)}")
        if not self.ok and not out:
            out.append("the clients got no work done")
        return out

    def markdown(self, command: str, machine: str | None, started: str | None, servers: int = 0) -> list[str]:
        """The report's lines: the run (on a local HBase of `servers` region servers, 0:
        standalone or another store), the verdict, its figures and what each kind of fault
        cost the clients."""
        r, b, n, c = self.requests, self.batches, self.nemesis, self.changes
        faults = ", ".join(f"{k['n']} {kind}" for kind, k in n.get("by_kind", {}).items())
        title = f"The soak on the {self.store} store" + (f", {servers} region servers" if servers else "")
        lines = [*header(title, command, machine, started),
                 f"{self.writers} writers, {self.readers} readers, {self.deleters} deleters and {self.correctors} "
                 f"correctors for {self.seconds:g} s"
                 + (f"; faults injected: {faults}" if faults else "; no faults injected") + ".", "",
                 "Verdict: " + ("every target held." if self.ok else "targets missed: " + "; ".join(self.missed()) + "."),
                 "", "| | |", "|---|---|",
                 f"| acknowledged rows | {self.inserts:,} ({b.get('acked', 0):,} batches), lost {self.acked_writes_lost} |",
                 f"| answers | {self.queries:,}; {self.answers_checked:,} checked against the oracle, wrong "
                 f"{self.wrong_answers} |",
                 f"| deletes, corrections | {c.get('deletes', 0):,} batches deleted, {c.get('corrections', 0):,} "
                 f"corrected; of killed clients {c.get('deletes_maybe', 0)} and {c.get('corrections_maybe', 0)}; "
                 f"lost {self.acked_changes_lost}, half done {self.half_changes} |",
                 f"| splits of leaves | {self.splits:,} |",
                 f"| batches of killed writers (maybes) | {b.get('maybe', 0)}: wholly in {b.get('maybe_in', 0)}, wholly "
                 f"out {b.get('maybe_out', 0)}, half in {self.half_batches} |",
                 f"| after the run | recovery by {self.recovery.get('by', '-')}; `check` "
                 f"{'clean' if not self.check_problems else 'found ' + str(len(self.check_problems))}; final queries "
                 f"{'exact' if self.final_exact else 'NOT exact'} |",
                 f"| failed requests | {r.get('failed', 0):,} (retried after \"store unavailable\": "
                 f"{r.get('retries', 0):,}); unclear errors {r.get('unclear_errors', 0)} |",
                 f"| longest request | failed {r.get('longest_failed', 0)} s, answered {r.get('longest_ok', 0)} s; over "
                 f"5 s {r.get('over_5s', 0)}, over {HUNG:g} s (hung) {r.get('hung', 0)} |",
                 f"| load average at the end | {self.load or '-'} |"]
        if self.beside:
            x = self.beside
            lines[-1:-1] = [
                f"| askers beside, on {x['dataset']} | {x['askers']} asking held-out questions: {x['answers']:,} "
                f"answers (p50 {x['p50_ms']} ms, p99 {x['p99_ms']} ms), wrong {x['wrong']}, refused {x['refused']} |",
                f"| region servers | {_servers(x)} |"]
        if n.get("by_kind"):
            lines += ["", "What each kind of fault cost the clients, seconds (min / median / max): unavailable, from "
                          "the first request it failed or slowed to the first good answer once the server was back; "
                          "recovery, from the server back (or the client replaced) to that answer.", "",
                      "| fault | n | unavailable | recovery | failed requests | hung | longest request |",
                      "|---|---|---|---|---|---|---|"]
            for kind, k in n["by_kind"].items():
                lines.append(f"| {kind} | {k['n']} | {_span(k['unavailable'])} | {_span(k['recovery'])} | {k['failed']} "
                             f"| {k['hung']} | {k['longest']:.1f} |")
            servers = n["by_kind"].get("regionserver")
            if servers:
                shares = ", ".join("-" if v is None else f"{v:.0%}" for v in servers["answered_share_in_outage"])
                lines += ["", f"Killed region servers: their regions answered again after "
                              f"{_span(servers['regions_back'])} s (never: {servers['regions_never_back']}); queries "
                              f"answered while they were away: {shares}."]
        return lines

    def table(self) -> str:
        """The report as a short table: one line per fault kind, then the totals."""
        lines = []
        if self.nemesis.get("by_kind"):
            lines.append(f"{'fault':<12}{'n':>4}  {'unavailable s':<20}{'answer after back s':<22}"
                         f"{'failed':>7}{'hung':>6}{'longest s':>11}")
            lines.append(f"{'':<18}{'min / median / max':<20}{'min / median / max':<22}")
            for kind, k in self.nemesis["by_kind"].items():
                lines.append(f"{kind[:12]:<12}{k['n']:>4}  {_span(k['unavailable']):<20}{_span(k['recovery']):<22}"
                             f"{k['failed']:>7}{k['hung']:>6}{k['longest']:>11.1f}")
            servers = self.nemesis["by_kind"].get("regionserver")
            if servers:
                shares = ", ".join("-" if v is None else f"{v:.0%}" for v in servers["answered_share_in_outage"])
                lines.append(f"region servers killed: their regions answered again after {_span(servers['regions_back'])}"
                             f" s (min / median / max; never: {servers['regions_never_back']}); queries answered "
                             f"while they were away: {shares}")
        r = self.requests
        if self.beside:
            x = self.beside
            lines.append(f"beside {x['dataset']}: {x['answers']} answers (p50 {x['p50_ms']} ms, p99 {x['p99_ms']} ms), "
                         f"wrong {x['wrong']}, refused {x['refused']}; region servers: {_servers(x)}")
        lines += [
            f"answers {self.queries} ({self.answers_checked} checked), wrong {self.wrong_answers}; "
            f"acknowledged rows {self.inserts}, lost {self.acked_writes_lost}; splits {self.splits}",
            f"maybe-batches {self.batches.get('maybe', 0)}: wholly in {self.batches.get('maybe_in', 0)}, "
            f"wholly out {self.batches.get('maybe_out', 0)}, half in {self.half_batches}",
            f"batches deleted {self.changes.get('deletes', 0)}, corrected {self.changes.get('corrections', 0)}; "
            f"acknowledged changes lost {self.acked_changes_lost}, half done {self.half_changes}",
            f"failed requests {r.get('failed', 0)} (retried {r.get('retries', 0)}), unclear errors "
            f"{r.get('unclear_errors', 0)}, longest failed {r.get('longest_failed', 0)} s, "
            f"longest answered {r.get('longest_ok', 0)} s, over 5 s {r.get('over_5s', 0)}, "
            f"over {HUNG:g} s (hung) {r.get('hung', 0)}",
            f"recovery: {self.recovery.get('by', '-')}; check {'clean' if not self.check_problems else self.check_problems[:3]}; "
            f"final queries exact: {self.final_exact}",
        ]
        return "\n".join(lines)


def _servers(beside: dict) -> str:
    """Each region server's heap after GC at its most, against its maximum, and whether
    it gave up."""
    parts = []
    for role, r in beside.get("region_servers", {}).items():
        heap = ("no collection logged" if r["heap_mb"] is None else
                f"heap after mixed and full collections at most {r['heap_after_gc_peak_mb']:,} of "
                f"{r['heap_mb']:,} MB ({r['peak_share']:.0%}; {r['collections']:,} collections, "
                f"{r['full_collections']:,} full)")
        parts.append(f"{role}: {heap}; " + (f"gave up: {r['fatal'][0]}" if r["fatal"] else "no OutOfMemoryError or abort"))
    return "; ".join(parts) or "-"


def _span(s: dict) -> str:
    return "-" if not s.get("n") else f"{s['min']:.1f} / {s['median']:.1f} / {s['max']:.1f}"
