"""The presenter view: one full-window, high-contrast view a room reads from the back of a meetup.

Big figures — tokens/s across the running step's requests and per request, requests in flight against the
server's slots, time to first token, VRAM used / estimate / total (host RAM on a machine without a GPU), GPU
utilisation — each over a dim graph of its last minute; the settings in force in one line; a caption band for
the demo script (the step, what the audience is seeing, its state as a colour and a word, its headline or why it
failed); the key legend. Every size follows the view's own size, so it reads at 1280×720, at --scale 1.5
(853×480 logical) and at 1920×1080.

Data rate is not paint rate: the director hands over its requests' figures up to ten times a second and the
sampler fills its buffers; a timer here redraws four times a second while the view shows. It reads memory only.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QHideEvent, QPainter, QPaintEvent, QResizeEvent, QShowEvent
from PySide6.QtWidgets import QLabel, QWidget

from app.core.demo.live import LiveRequests
from app.core.demo.script import DemoScript, StepResult, StepState
from app.core.models import RunningModel
from app.core.server.mapping import MODEL_FILE, TuningMapping
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerStatus
from app.core.telemetry_buffers import Channel
from app.core.units import MIB_PER_GIB
from app.ui.pages.context import PageContext
from app.ui.pages.dashboard.tiles import finite, short_gpu_name
from app.ui.presenter.figure_tile import (
    GRAPH_WINDOW_S,
    MIN_TEXT_PX,
    NO_DATA,
    FigureTile,
    Graph,
    ScaledLabel,
    Trace,
    line_height_of,
    text_font,
    text_width,
    wrapped_height,
)
from app.ui.widgets import plots, theme

REDRAW_INTERVAL_MS = 250  # 4 Hz: live enough for a room, never per token
KEY_LEGEND = "Space next step · Esc stop · R reset · F5 leave"
TOKEN_WINDOW_S = 2.0  # the token meter's rate window (as the dashboard's throughput)

# The state badge: a colour and a word per step state.
STATE_COLOURS: dict[StepState, str] = {
    StepState.WAITING: "#9a9da8",
    StepState.RUNNING: theme.ACCENT,
    StepState.DONE: theme.OK,
    StepState.FAILED: theme.ERROR,
    StepState.STOPPED: theme.WARNING,
}
HEADLINE_COLOUR = "#f2f3f5"
REASON_COLOURS: dict[StepState, str] = {StepState.FAILED: "#ff9b9b", StepState.STOPPED: "#ffd27a"}
DONE_COLOUR = "#7ef0ae"
NOTICE_COLOUR = "#ffd27a"
STEP_COLOUR = "#9fd8ff"
SAYS_COLOUR = "#ffffff"
SETTINGS_COLOUR = "#d4d6dd"
KEYS_COLOUR = "#b8bac2"
BADGE_TEXT = "#101115"

# The figures, in reading order (three a row).
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("tokens", "Tokens/s · all requests", plots.TOKENS_COLOR),
    ("per_request", "Tokens/s · per request", plots.ORANGE),
    ("ttft", "Time to first token", plots.GREEN),
    ("in_flight", "Requests in flight", plots.MAGENTA),
    ("memory", "VRAM", plots.VRAM_USED_COLOR),
    ("util", "GPU utilisation", plots.GPU_UTIL_COLOR),
)
NO_GPU_MEMORY_TITLE = "RAM (no GPU)"
NO_GPU = "no GPU"
NO_GPU_COLOUR = "#b8bac2"  # a word, not a figure: quieter and smaller than the figures
NO_GPU_SCALE = 8.0


# --- words and figures ---------------------------------------------------------------------------------
def format_rate(tps: float | None) -> tuple[str, str]:
    """Tokens per second as (figure, unit): one decimal below 10, none above; NO_DATA without a reading."""
    if tps is None or not finite(tps):
        return NO_DATA, ""
    return (f"{tps:.1f}" if tps < 10 else f"{tps:,.0f}"), "tok/s"


def format_ms(ms: float | None) -> tuple[str, str]:
    """A time as (figure, unit): ms below a second, else seconds with one decimal."""
    if ms is None or not finite(ms):
        return NO_DATA, ""
    return (f"{ms:.0f}", "ms") if ms < 1000 else (f"{ms / 1000:.1f}", "s")


def format_gib(mib: float | None) -> str:
    return f"{mib / MIB_PER_GIB:.1f}" if mib is not None and finite(mib) else NO_DATA


def short_reason(reason: str) -> str:
    """The first clause of a reason ('No NVIDIA driver found (libnvidia-ml…) — GPU graphs are off' ->
    'No NVIDIA driver found'): a tile has room for a few words."""
    text = reason.strip()
    for mark in (" (", " — ", ". ", "; ", ": "):
        cut = text.find(mark)
        if cut > 0:
            text = text[:cut]
    return text.rstrip(".") or "no readings"


def model_name(status: ServerStatus, running: list[RunningModel], settings: ServerSettings,
               tuning: TuningMapping) -> str:
    """The model the server serves: the file a one-model server serves, else what it reports loaded, else the
    model file the settings name; '' when none is known."""
    if status.state.is_running and status.serving:
        return _file_stem(status.serving)
    if running:
        return ", ".join(m.name for m in running)
    for option in tuning.options:
        if option.kind == MODEL_FILE:
            chosen = str(option.value_in(settings)).strip()
            if chosen:
                return _file_stem(chosen)
    return ""


def _file_stem(path: str) -> str:
    name = os.path.basename(path.rstrip("/\\"))
    return name[:-5] if name.lower().endswith(".gguf") else name


def settings_lines(settings: ServerSettings, tuning: TuningMapping, model: str) -> tuple[str, str]:
    """The settings in force in one line: with the server's own name of each setting ('parallel 8 (-np)'), and
    without them for a narrow view."""
    context = str(settings.context_length) if settings.context_length else "default"
    items = (("parallel", str(settings.num_parallel), "num_parallel"), ("context", context, "context_length"),
             ("KV cache", settings.kv_cache_type, "kv_cache_type"),
             ("flash attention", settings.flash_attention, "flash_attention"))
    head = [model or "no model"]
    named, plain = [], []
    for word, value, field in items:
        name = tuning.setting_name(field)
        plain.append(f"{word} {value}")
        named.append(f"{word} {value} ({name})" if name else f"{word} {value}")
    return " · ".join(head + named), " · ".join(head + plain)


class _History:
    """A figure's values over the last minute, (time, value) at the redraw rate; NaN where there was none."""

    def __init__(self) -> None:
        self._points: deque[tuple[float, float]] = deque()

    def add(self, t: float, value: float | None) -> None:
        self._points.append((t, value if value is not None and finite(value) else math.nan))
        while self._points and self._points[0][0] < t - GRAPH_WINDOW_S - 2.0:
            self._points.popleft()

    def clear(self) -> None:
        self._points.clear()

    def arrays(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """(seconds before now, values)."""
        if not self._points:
            return np.zeros(0), np.zeros(0)
        data = np.array(self._points, dtype=float)
        return data[:, 0] - now, data[:, 1]

    def peak(self) -> float:
        values = [v for _, v in self._points if math.isfinite(v)]
        return max(values) if values else math.nan


class PresenterView(QWidget):
    """The presenter's full-window view over the app's context (see the module's text). It binds no keys: the
    window does (F5, Space/Right/PageDown, Esc, R, Home), and the footer names them."""

    def __init__(self, context: PageContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("PresenterView")
        self._context = context
        self._clock: Callable[[], float] = time.monotonic
        self._gpu_info = context.gpu.info() if context.gpu.available else None
        self._gpu_reason = context.gpu.unavailable_reason
        self._script: DemoScript | None = None
        self._live: LiveRequests | None = None
        self._estimate_mib: float | None = None
        self._running_models: list[RunningModel] = []
        self._u = 4.8
        # What clear() forgot: samples up to this time, tokens the meter had counted.
        self._samples_after = -math.inf
        self._meter_tokens_at_clear = context.meter.total_tokens if context.meter is not None else 0
        self._histories = {key: _History() for key in ("tokens", "per_request", "ttft", "in_flight")}
        self._shut = False
        self.redraw_count = 0

        self.step_label = ScaledLabel(STEP_COLOUR, bold=True, parent=self)
        self.badge = QLabel(self)
        self.badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.badge.hide()
        self.badge_state: StepState | None = None
        self.says_label = ScaledLabel(SAYS_COLOUR, parent=self)
        self.says_label.setWordWrap(True)
        self.says_label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.result_label = ScaledLabel(HEADLINE_COLOUR, bold=True, parent=self)
        self.tiles: dict[str, FigureTile] = {key: FigureTile(key, title, accent, self)
                                             for key, title, accent in FIGURES}
        if self._gpu_info is None:
            self.tiles["memory"].set_title(NO_GPU_MEMORY_TITLE)
            self.tiles["util"].value_scale = NO_GPU_SCALE
            self.tiles["util"].set_value_colour(NO_GPU_COLOUR)
        self.settings_label = ScaledLabel(SETTINGS_COLOUR, parent=self)
        self.notice_label = ScaledLabel(NOTICE_COLOUR, bold=True, parent=self)
        self.keys_label = ScaledLabel(KEYS_COLOUR, parent=self)
        self._step_text = f"Live on {context.server_name}"
        self._says_text = ""
        self._result_text = ""
        self._notice_text = ""
        self._settings_texts = ("", "")

        server = context.server
        self._connections = [(server.settings_applied, self._on_settings),
                             (server.status_changed, self._on_status),
                             (server.running_models_changed, self._on_running_models)]
        for signal, slot in self._connections:
            signal.connect(slot)
        self._show_settings()

        self.timer = QTimer(self)
        self.timer.setInterval(REDRAW_INTERVAL_MS)
        self.timer.timeout.connect(self._tick)
        self._show_figures()
        self._layout()

    # --- the agreed API ----------------------------------------------------------------------------
    def set_estimate_mib(self, mib: float | None) -> None:
        """The memory the settings in force should take (the fit panel's price), MiB; None: no estimate."""
        self._estimate_mib = mib if mib is not None and finite(mib) else None
        self._show_figures()

    def set_script(self, script: DemoScript) -> None:
        """Show the script's title and its first step (nothing has run yet)."""
        self._script = script
        count = len(script)
        self._step_text = f"{script.title} · {count} step{'s' if count != 1 else ''}"
        self._says_text = f"Space starts step 1: {script.step(0).title}" if count else ""
        self._result_text = ""
        self._set_badge(None)
        self._layout()

    def show_step(self, index: int, state: StepState, result: StepResult | None) -> None:
        """Step `index` (0-based) in `state`: "Step k of n · title", what it says, the state as a colour and a
        word, and its headline or, where it failed or was stopped, why in one line."""
        script = self._script
        step = script.step(index) if script is not None and 0 <= index < len(script) else None
        of = f" of {len(script)}" if script is not None else ""
        self._step_text = f"Step {index + 1}{of}" + (f" · {step.title}" if step is not None else "")
        self._says_text = step.says if step is not None else ""
        self._set_badge(state)
        text, colour = "", HEADLINE_COLOUR
        if result is not None:
            if result.reason and state in (StepState.FAILED, StepState.STOPPED):
                text, colour = result.reason, REASON_COLOURS[state]
            elif result.headline:
                text = result.headline
                colour = DONE_COLOUR if state is StepState.DONE else HEADLINE_COLOUR
            elif result.reason:
                text = result.reason
        self._result_text = text
        self.result_label.set_colour(colour)
        self._layout()

    def set_live(self, live: LiveRequests) -> None:
        """The running step's requests; shown at the next redraw (the view redraws at its own rate)."""
        self._live = live

    def set_notice(self, text: str) -> None:
        """One line for the presenter (e.g. "Step 2 still running: Esc stops it"); '' removes it."""
        self._notice_text = " ".join(text.split())
        self._layout()

    def clear(self) -> None:
        """Empty the figures and their graphs (the reset): what was measured before is forgotten, the next
        readings start afresh. The script, its caption, the estimate and the settings line stay."""
        self._live = None
        for history in self._histories.values():
            history.clear()
        last = self._context.samples.last()
        self._samples_after = last[0] if last is not None else -math.inf
        meter = self._context.meter
        self._meter_tokens_at_clear = meter.total_tokens if meter is not None else 0
        self._show_figures()

    def shutdown(self) -> None:
        """Stop redrawing and stop following the server (the view is going away)."""
        self._shut = True
        self.timer.stop()
        for signal, slot in self._connections:
            try:
                signal.disconnect(slot)
            except (RuntimeError, TypeError):  # already gone with its sender
                pass
        self._connections = []

    # --- Qt events ----------------------------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if not self._shut:
            self.timer.start()
            self._tick()

    def hideEvent(self, event: QHideEvent) -> None:  # noqa: N802 - Qt override
        super().hideEvent(event)
        self.timer.stop()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._layout()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor(theme.BACKGROUND))
        painter.end()

    # --- server signals -------------------------------------------------------------------------------
    def _on_settings(self, _settings: ServerSettings) -> None:
        self._show_settings()

    def _on_status(self, _status: ServerStatus) -> None:
        self._show_settings()

    def _on_running_models(self, models: list[RunningModel]) -> None:
        self._running_models = list(models)
        self._show_settings()

    def _show_settings(self) -> None:
        server = self._context.server
        settings = server.settings
        tuning = self._context.backend.tuning
        model = model_name(server.status, self._running_models, settings, tuning)
        texts = settings_lines(settings, tuning, model)
        if texts != self._settings_texts:
            self._settings_texts = texts
            self._layout_footer()

    # --- figures --------------------------------------------------------------------------------------
    def _tick(self) -> None:
        """One redraw: record the live figures for their graphs and show everything."""
        if self._shut or not self.isVisible():
            return
        now = self._clock()
        live = self._live
        self._histories["tokens"].add(now, self._aggregate_tps(now))
        self._histories["per_request"].add(now, live.per_request_tps if live is not None else None)
        self._histories["ttft"].add(now, live.ttft_ms if live is not None else None)
        in_flight = self._in_flight()
        self._histories["in_flight"].add(now, float(in_flight) if in_flight is not None else None)
        self._show_figures(now)

    def _show_figures(self, now: float | None = None) -> None:
        now = self._clock() if now is None else now
        self.redraw_count += 1
        live = self._live
        tiles = self.tiles
        aggregate = self._aggregate_tps(now)
        value, unit = format_rate(aggregate)
        tiles["tokens"].set_figure(value, unit, self._aggregate_source() if value != NO_DATA else "no tokens yet")
        value, unit = format_rate(live.per_request_tps if live is not None else None)
        tiles["per_request"].set_figure(value, unit, self._per_request_detail(live))
        value, unit = format_ms(live.ttft_ms if live is not None else None)
        tiles["ttft"].set_figure(value, unit, "median of the replies" if value != NO_DATA else "")
        self._show_in_flight()
        for key in ("tokens", "per_request", "ttft"):
            tiles[key].set_graph(self._own_graph(key, now, tiles[key].accent))
        rows_t, rows = self._recent_samples()
        self._show_memory(rows_t, rows)
        self._show_util(rows_t, rows)

    def _aggregate_tps(self, now: float) -> float | None:
        """The step's own total, else the app's token meter once it has counted since the last clear, else the
        sampler's reading of it; None without any."""
        live = self._live
        if live is not None and live.aggregate_tps is not None:
            return live.aggregate_tps
        meter = self._context.meter
        if meter is not None:
            return meter.rate(now, TOKEN_WINDOW_S) if self._meter_counted() else None
        _, rows = self._recent_samples()
        column = rows[:, Channel.TOKENS_PER_S] if len(rows) else np.zeros(0)
        if not np.any(column[np.isfinite(column)] > 0):
            return None
        return float(column[-1]) if math.isfinite(column[-1]) else None

    def _aggregate_source(self) -> str:
        live = self._live
        if live is not None and live.aggregate_tps is not None:
            return f"this step · {live.sent} sent, {live.finished} done"
        return "the app's requests, last 2 s"

    @staticmethod
    def _per_request_detail(live: LiveRequests | None) -> str:
        if live is None or live.per_request_tps is None:
            return ""
        if live.in_flight:
            return f"median of {live.in_flight} streaming"
        return "the last reply"

    def _slots(self) -> tuple[int, str]:
        """The slots requests compete for and where the figure comes from (the server's report, else the
        parallel setting)."""
        ring = self._context.server_ring
        latest = ring.latest if ring is not None else None
        if latest is not None and latest.slots_total is not None:
            return latest.slots_total, "server's count"
        name = self._context.backend.tuning.setting_name("num_parallel")
        return self._context.server.settings.num_parallel, name or "parallel setting"

    def _meter_counted(self) -> bool:
        """True once the app's token meter has seen a request or a token since the last clear."""
        meter = self._context.meter
        return meter is not None and (meter.total_tokens > self._meter_tokens_at_clear or meter.in_flight > 0)

    def _in_flight(self) -> int | None:
        """The running step's requests in flight, else the app's (the token meter's count, once it has seen
        any); None without either."""
        if self._live is not None:
            return self._live.in_flight
        meter = self._context.meter
        return meter.in_flight if meter is not None and self._meter_counted() else None

    def _show_in_flight(self) -> None:
        slots, source = self._slots()
        tile = self.tiles["in_flight"]
        in_flight = self._in_flight()
        waiting = in_flight - slots if in_flight is not None and in_flight > slots else 0
        detail = f"of {slots} slot{'s' if slots != 1 else ''} ({source})"
        if waiting:
            detail = f"{waiting} waiting · {detail}"
        tile.set_figure(f"{in_flight} / {slots}" if in_flight is not None else NO_DATA, "", detail)
        history = self._histories["in_flight"]
        x, y = history.arrays(self._clock())
        peak = history.peak()
        top = max(float(slots), peak if finite(peak) else 0.0, 1.0) * 1.15
        tile.set_graph(Graph((Trace(x, y, tile.accent),), top, ((float(slots), plots.LIMIT_GREY),)))

    def _own_graph(self, key: str, now: float, colour: str) -> Graph:
        history = self._histories[key]
        x, y = history.arrays(now)
        peak = history.peak()
        return Graph((Trace(x, y, colour),), peak * 1.2 if finite(peak) and peak > 0 else 1.0)

    def _recent_samples(self) -> tuple[np.ndarray, np.ndarray]:
        """The sampler's rows of the last minute after the last clear: (seconds before the newest, rows)."""
        samples = self._context.samples
        last = samples.last()
        if last is None or last[0] <= self._samples_after:
            return np.zeros(0), np.zeros((0, Channel.COUNT))
        newest = last[0]
        t, rows = samples.view(since=max(newest - GRAPH_WINDOW_S - 1.0, self._samples_after))
        keep = t > self._samples_after
        return t[keep] - newest, rows[keep]

    def _show_memory(self, x: np.ndarray, rows: np.ndarray) -> None:
        tile = self.tiles["memory"]
        gpu = self._gpu_info is not None
        used_col, total_col = ((Channel.GPU_MEM_USED_MIB, Channel.GPU_MEM_TOTAL_MIB) if gpu
                               else (Channel.RAM_USED_MIB, Channel.RAM_TOTAL_MIB))
        used = float(rows[-1, used_col]) if len(rows) else math.nan
        total = float(rows[-1, total_col]) if len(rows) else math.nan
        if not finite(total) and self._gpu_info is not None:
            total = self._gpu_info.memory_total_mib
        parts = [f"of {format_gib(total)} GiB"] if finite(total) else []
        estimate = self._estimate_mib
        if estimate is None:
            parts.append("no estimate")
        else:  # on the CPU the figure is the whole machine's RAM and the estimate the server's share of it
            parts.append(f"estimate {format_gib(estimate)} GiB" if gpu else f"server needs ~{format_gib(estimate)} GiB")
        value = format_gib(used)
        tile.set_figure(value, "GiB", " · ".join(parts))
        top = total if finite(total) else max(used if finite(used) else 0.0, estimate or 0.0) * 1.2
        levels = ((estimate / MIB_PER_GIB, plots.VRAM_ESTIMATE_COLOR),) if estimate is not None else ()
        y = rows[:, used_col] / MIB_PER_GIB if len(rows) else np.zeros(0)
        tile.set_graph(Graph((Trace(x, y, tile.accent),), (top or 1.0) / MIB_PER_GIB, levels))

    def _show_util(self, x: np.ndarray, rows: np.ndarray) -> None:
        tile = self.tiles["util"]
        if self._gpu_info is None:
            tile.set_figure(NO_GPU, "", short_reason(self._gpu_reason) if self._gpu_reason else "")
            tile.setToolTip(self._gpu_reason)
            tile.set_graph(Graph())
            return
        util = float(rows[-1, Channel.GPU_UTIL_PCT]) if len(rows) else math.nan
        tile.set_figure(f"{util:.0f}" if finite(util) else NO_DATA, "%", short_gpu_name(self._gpu_info.name))
        y = rows[:, Channel.GPU_UTIL_PCT] if len(rows) else np.zeros(0)
        tile.set_graph(Graph((Trace(x, y, tile.accent),), 100.0))

    def _set_badge(self, state: StepState | None) -> None:
        self.badge_state = state
        if state is None:
            self.badge.hide()
            return
        self.badge.setText(state.value.upper())
        self.badge.show()
        self._style_badge()

    def _style_badge(self) -> None:
        state = self.badge_state
        if state is None:
            return
        px = max(MIN_TEXT_PX, round(3.4 * self._u))
        pad_v, pad_h = round(0.5 * self._u), round(1.6 * self._u)
        self.badge.setStyleSheet(
            f"background: {STATE_COLOURS[state]}; color: {BADGE_TEXT}; font-size: {px}px; font-weight: 700; "
            f"border-radius: {round(1.2 * self._u)}px; padding: {pad_v}px {pad_h}px; border: none; margin: 0px;")
        width = text_width(text_font(px, True), self.badge.text()) + 2 * pad_h + 2
        height = line_height_of(px) + 2 * pad_v
        self.badge.setFixedSize(width, height)

    # --- layout ---------------------------------------------------------------------------------------
    def _layout(self) -> None:
        """Place and size everything from the view's size (fonts in px of 1 % of its readable height)."""
        width, height = max(1, self.width()), max(1, self.height())
        u = max(2.0, min(height, width * 9 / 16) / 100.0)
        self._u = u
        side, top = round(2.6 * u), round(2.0 * u)
        inner = max(1, width - 2 * side)

        # The caption band: step and badge, what the step says (up to three lines), its headline or reason.
        self._style_badge()
        badge_w = self.badge.width() + round(1.5 * u) if self.badge.isVisibleTo(self) else 0
        self.step_label.show_line(self._step_text, inner - badge_w, round(4.2 * u), MIN_TEXT_PX)
        row_h = max(self.step_label.line_height(), self.badge.height() if badge_w else 0)
        self.step_label.setGeometry(side, top + (row_h - self.step_label.line_height()) // 2, inner - badge_w,
                                    self.step_label.line_height())
        if badge_w:
            self.badge.move(width - side - self.badge.width(), top + (row_h - self.badge.height()) // 2)
        y = top + row_h + round(0.6 * u)
        says_h = 2 * line_height_of(round(6.0 * u))
        self._fit_says(inner, says_h)
        self.says_label.setGeometry(side, y, inner, says_h)
        y += says_h + round(0.4 * u)
        self.result_label.show_line(self._result_text, inner, round(3.8 * u), MIN_TEXT_PX)
        self.result_label.setGeometry(side, y, inner, self.result_label.line_height())
        y += self.result_label.line_height() + round(1.6 * u)

        # The footer: the settings line, then the notice beside the key legend.
        footer_top = self._layout_footer()

        # The figures: two rows of three between the caption and the footer.
        gap = round(1.4 * u)
        tiles_bottom = footer_top - round(1.2 * u)
        rows, columns = 2, 3
        tile_w = (inner - (columns - 1) * gap) / columns
        tile_h = max(1.0, (tiles_bottom - y - (rows - 1) * gap) / rows)
        for i, tile in enumerate(self.tiles.values()):
            row, column = divmod(i, columns)
            x0 = side + round(column * (tile_w + gap))
            x1 = side + round(column * (tile_w + gap) + tile_w)
            y0 = y + round(row * (tile_h + gap))
            y1 = y + round(row * (tile_h + gap) + tile_h)
            tile.set_unit(u)
            tile.setGeometry(x0, y0, x1 - x0, y1 - y0)

    def _layout_footer(self) -> int:
        """Place the settings line, the notice and the key legend at the bottom; returns the footer's top."""
        u, width, height = self._u, max(1, self.width()), max(1, self.height())
        side, bottom = round(2.6 * u), round(1.8 * u)
        inner = max(1, width - 2 * side)
        self.keys_label.full_text = KEY_LEGEND
        keys_px = max(MIN_TEXT_PX, round(3.0 * u))
        keys_w = min(inner // 2, text_width(text_font(keys_px), KEY_LEGEND) + 2)
        self.keys_label.show_line(KEY_LEGEND, keys_w, keys_px, MIN_TEXT_PX)
        notice_w = inner - keys_w - round(2.0 * u)
        self.notice_label.show_line(self._notice_text, notice_w, round(3.3 * u), MIN_TEXT_PX)
        row_h = max(self.keys_label.line_height(), self.notice_label.line_height())
        row_top = height - bottom - row_h
        self.notice_label.setGeometry(side, row_top + row_h - self.notice_label.line_height(), notice_w,
                                      self.notice_label.line_height())
        self.keys_label.setGeometry(width - side - keys_w, row_top + row_h - self.keys_label.line_height(), keys_w,
                                    self.keys_label.line_height())
        named, plain = self._settings_texts
        settings_px, least = round(3.4 * u), max(MIN_TEXT_PX, round(2.6 * u))
        fits_named = text_width(text_font(least), named) <= inner - 2
        self.settings_label.show_line(named if fits_named else plain, inner, settings_px, MIN_TEXT_PX)
        if not fits_named:
            self.settings_label.setToolTip(named)
        settings_top = row_top - round(0.5 * u) - self.settings_label.line_height()
        self.settings_label.setGeometry(side, settings_top, inner, self.settings_label.line_height())
        return settings_top

    def _fit_says(self, width: int, height: int) -> None:
        """The step's words as large as the band allows (two lines of the largest size; more, smaller lines for a
        long text)."""
        text = self._says_text or " "
        px = round(6.0 * self._u)
        while px > MIN_TEXT_PX and wrapped_height(text_font(px), text, width) > height:
            px -= 1
        self.says_label.set_px(px)
        self.says_label.full_text = self._says_text
        if self.says_label.text() != text:
            self.says_label.setText(text)

