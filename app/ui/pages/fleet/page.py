"""The Fleet page: several servers in one window. Each endpoint of the fleet file with its backend kind,
health (down: why), version, model, tokens/s, slots and queue, its host's GPU memory and utilisation with
where they came from, the balancer's row, and the PromQL in use. Without a fleet file it says how to
write one, with an example."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from app.core.fleet_status import FleetSnapshot
from app.ui.pages.context import PageContext
from app.ui.pages.fleet.feed import FleetFeed
from app.ui.pages.fleet.table import FleetTable
from app.ui.widgets.forms import InlineMessage

READY_POLLS = 8  # a screenshot waits for these: its sparklines have a line
MATCHING_RULE = (
    "A server's host figures are the series whose DCGM Hostname label, or the host part of whose instance "
    "label, is the server's host (its host = \"…\" in the fleet file, else its URL's host). GPU: DCGM "
    "exporter first, else ollama-deck's exporter; RAM: node exporter, else ollama-deck's exporter. The "
    "server's own series are those of instance = its URL's port on that host.")


def targets_text(snapshot: FleetSnapshot) -> str:
    """'7 targets up', or '1 of 7 targets down: job instance (its last error); …'."""
    down = snapshot.targets_down
    if not down:
        return f"{len(snapshot.targets)} scrape targets up"
    listed = "; ".join(f"{t.job} {t.instance}" + (f" ({t.last_error})" if t.last_error else "") for t in down)
    return f"{len(down)} of {len(snapshot.targets)} scrape targets down: {listed}"


def _monospace(text: str = "") -> QPlainTextEdit:
    view = QPlainTextEdit(text)
    view.setObjectName("LogView")
    view.setReadOnly(True)
    view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
    font = QFont("DejaVu Sans Mono")
    font.setStyleHint(QFont.StyleHint.Monospace)
    view.setFont(font)
    return view


class FleetPage(QWidget):
    """`feed`: the fleet's monitor on the loop (None: no fleet file given, or `problem` says why it cannot be
    used); `example`: a fleet file to show in the empty state."""

    def __init__(self, context: PageContext, feed: FleetFeed | None = None, *, example: str = "",
                 problem: str = "", source: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.feed = feed
        self.snapshot: FleetSnapshot | None = None
        self.polls = 0
        title = QLabel("Fleet")
        title.setObjectName("PageTitle")
        self.subtitle = QLabel(f"from {source}" if source else "")
        self.subtitle.setObjectName("Dim")
        top = QHBoxLayout()
        top.addWidget(title)
        top.addSpacing(12)
        top.addWidget(self.subtitle, 1)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 12, 16, 12)
        outer.setSpacing(8)
        outer.addLayout(top)
        self.problem = InlineMessage(prominent=True)
        outer.addWidget(self.problem)
        self.table = FleetTable()
        self.down_label = InlineMessage()
        self.notes_label = QLabel()
        self.notes_label.setObjectName("Dim")
        self.notes_label.setWordWrap(True)
        self.queries_view = _monospace()
        self.queries_box = QGroupBox("PromQL in use")
        ql = QVBoxLayout(self.queries_box)
        self.prometheus_label = QLabel()
        self.prometheus_label.setWordWrap(True)
        self.prometheus_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        ql.addWidget(self.prometheus_label)
        ql.addWidget(self.queries_view, 1)
        rule = QLabel(MATCHING_RULE)
        rule.setObjectName("Dim")
        rule.setWordWrap(True)
        ql.addWidget(rule)
        self.empty = QWidget()
        self._build_empty(example)
        if feed is None:
            self.table.hide()
            self.queries_box.hide()
            self.subtitle.setText("no fleet file")
            if problem:
                self.problem.show_error(problem)
            outer.addWidget(self.empty, 1)
        else:
            self.empty.hide()
            outer.addWidget(self.table, 2)
            outer.addWidget(self.down_label)
            outer.addWidget(self.notes_label)
            outer.addWidget(self.queries_box, 1)
            feed.setParent(self)
            feed.snapshot_ready.connect(self.show_snapshot)
            feed.start()

    def _build_empty(self, example: str) -> None:
        layout = QVBoxLayout(self.empty)
        layout.setContentsMargins(0, 8, 0, 0)
        intro = QLabel(
            "Watch several servers in one window: start ollama-deck with <b>--fleet FILE</b>, a TOML file with one "
            "<b>[[server]]</b> table per endpoint (name, url, backend, and optionally the host's name as Prometheus "
            "labels it), optionally the <b>[balancer]</b> in front of some of them and a <b>[prometheus]</b> server "
            "that scrapes their hosts (NVIDIA's DCGM exporter, the node exporter, or "
            "<code>ollama-deck exporter</code>). For example:")
        intro.setWordWrap(True)
        intro.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(intro)
        self.example_view = _monospace(example)
        self.example_view.setMinimumHeight(300)
        layout.addWidget(self.example_view, 1)
        command = QLabel("ollama-deck --fleet fleet.toml --page fleet")
        command.setObjectName("Dim")
        command.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(command)

    @property
    def ready(self) -> bool:
        """True once a few polls are shown (a screenshot's sparklines have a line), or with no fleet to poll."""
        return self.feed is None or self.polls >= READY_POLLS

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """A new poll of every endpoint (GUI thread)."""
        self.snapshot = snapshot
        self.polls += 1
        rows = [*snapshot.endpoints, *([snapshot.balancer] if snapshot.balancer else [])]
        self.table.set_endpoints(rows)
        down = [f"{e.name}: {e.health.value} — {e.why}" for e in rows if e.health.is_down]
        if down:
            self.down_label.show_error("\n".join(down))
        else:
            self.down_label.clear_message()
        self.notes_label.setText("\n".join(snapshot.notes))
        self.notes_label.setVisible(bool(snapshot.notes))
        if not snapshot.prometheus_url:
            self.prometheus_label.setText("No [prometheus] in the fleet file: host figures come from this machine's "
                                          "NVML for servers on it, and are unknown for the others.")
        elif snapshot.prometheus_problem:
            self.prometheus_label.setText(f"Prometheus at {snapshot.prometheus_url}: {snapshot.prometheus_problem}")
        else:
            self.prometheus_label.setText(f"Prometheus at {snapshot.prometheus_url} ({targets_text(snapshot)}), "
                                          "GET /api/v1/query (instant vectors), each poll:")
        text = "\n".join(snapshot.queries)
        if self.queries_view.toPlainText() != text:
            self.queries_view.setPlainText(text)

    def shutdown(self) -> None:
        """Stop polling (on quit)."""
        if self.feed is not None:
            self.feed.stop()


__all__ = ["FleetPage", "MATCHING_RULE"]
