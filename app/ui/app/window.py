"""The main window: header, page navigation and the pages."""

from __future__ import annotations

import functools

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence, QResizeEvent, QShortcut, QShowEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QScrollArea,
    QSizePolicy,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.ui.widgets.banner import Banner
from app.ui.widgets.forms import guard_form
from app.ui.app.header import Header
from app.ui.server.controller import ServerController


# The window's default size, where the screen has room for it.
DEFAULT_SIZE = QSize(1440, 900)
# How long after showing the window manager has framed the window, so that the frame can be measured.
FRAME_SETTLE_MS = 200
FRAME_TRIES = 10  # so many waits at most (a screen without window manager frames nothing)
# The sidebar's width on a wide window; narrower than NARROW_WINDOW_PX (a 1280x720 projector at --scale 1.5,
# 853 px wide to the widgets) it narrows to its titles, and the page beside it keeps the room.
SIDEBAR_WIDTH_PX = 170
NARROW_WINDOW_PX = 1000
# What the style sheet puts around a sidebar title: its padding each side, the marker bar and the border.
SIDEBAR_ITEM_EXTRA_PX = 2 * 18 + 3 + 1 + 8


class MainWindow(QMainWindow):
    """A sidebar of pages beside a stack, under a header that always shows the server and GPU; or, in presenter
    mode, one full-screen view instead of all of them."""

    presenting_changed = Signal(bool)

    def __init__(self, controller: ServerController, server_name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("ollama-deck")
        self.controller = controller
        self.header = Header(server_name)
        self.banner = Banner()
        self.sidebar = QListWidget()
        self.sidebar.setObjectName("Sidebar")
        self.sidebar.setFixedWidth(SIDEBAR_WIDTH_PX)
        self.sidebar.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # narrowed, titles stay whole
        self.sidebar.setIconSize(QSize(18, 18))
        self.stack = QStackedWidget()
        self._pages: dict[str, QWidget] = {}
        self._holders: dict[str, QScrollArea] = {}
        self._page_keys: dict[int, QShortcut] = {}  # sidebar row -> its Ctrl+N shortcut

        body = QWidget()
        bl = QHBoxLayout(body)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.setSpacing(0)
        # The sidebar's column: the pages, and under them the tools that belong to no page (the stage's menu).
        side = QWidget()
        side.setObjectName("SidebarColumn")
        sl = QVBoxLayout(side)
        sl.setContentsMargins(0, 0, 0, 0)
        sl.setSpacing(0)
        sl.addWidget(self.sidebar, 1)
        self._side_tools = QVBoxLayout()
        self._side_tools.setContentsMargins(8, 8, 8, 12)
        sl.addLayout(self._side_tools)
        bl.addWidget(side)
        col = QWidget()
        cl = QVBoxLayout(col)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.setSpacing(0)
        cl.addWidget(self.banner)
        cl.addWidget(self.stack, 1)
        bl.addWidget(col, 1)

        root = QWidget()
        rl = QVBoxLayout(root)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.setSpacing(0)
        rl.addWidget(self.header)
        rl.addWidget(body, 1)
        # The panel (header, sidebar, pages) or the presenter's view, one at a time.
        self._modes = QStackedWidget()
        self._modes.addWidget(root)
        self._panel = root
        self.presenter: QWidget | None = None
        self._was_full_screen = False
        self.setCentralWidget(self._modes)
        self.sidebar.currentRowChanged.connect(self.stack.setCurrentIndex)

        QShortcut(QKeySequence(Qt.Key.Key_F11), self, self.toggle_full_screen)
        # Esc leaves full screen (a presenter's first reflex); out of full screen it is left to the page.
        self._leave_full_screen = QShortcut(QKeySequence(Qt.Key.Key_Escape), self, self.leave_full_screen)
        self._leave_full_screen.setEnabled(False)
        for keys in quit_keys():
            QShortcut(keys, self, self.close)  # owned by the window
        self._fitted_once = False
        self._follow(controller)

    def _follow(self, controller: ServerController) -> None:
        self.controller = controller
        controller.status_changed.connect(self.header.set_status)
        controller.running_models_changed.connect(self.header.set_running_models)
        self.header.set_status(controller.status)

    def reset(self, controller: ServerController, server_name: str) -> None:
        """Empty the window for another server (the embedded engine started from the banner): the pages
        go, the banner clears, and the header follows the new controller under the new name. The window
        itself stays where it is."""
        self.controller.status_changed.disconnect(self.header.set_status)
        self.controller.running_models_changed.disconnect(self.header.set_running_models)
        self.sidebar.blockSignals(True)  # no page switches while the rows go
        self.sidebar.clear()
        self.sidebar.blockSignals(False)
        for holder in self._holders.values():
            self.stack.removeWidget(holder)
            holder.deleteLater()
        self._pages.clear()
        self._holders.clear()
        self.banner.clear()
        self.header.set_server_name(server_name)
        self.header.set_running_models([])
        self._follow(controller)

    def add_sidebar_tool(self, widget: QWidget) -> None:
        """Put a control under the pages in the sidebar (it never widens the sidebar; its owner deletes it)."""
        widget.setSizePolicy(QSizePolicy.Policy.Ignored, widget.sizePolicy().verticalPolicy())
        self._side_tools.addWidget(widget)

    def narrow_sidebar_width(self) -> int:
        """The sidebar's width on a narrow window: its longest title, whole."""
        metrics = self.sidebar.fontMetrics()
        titles = [self.sidebar.item(row).text() for row in range(self.sidebar.count())]
        return min(SIDEBAR_WIDTH_PX, max((metrics.horizontalAdvance(t) for t in titles), default=0)
                   + SIDEBAR_ITEM_EXTRA_PX)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        """A narrow window narrows the sidebar, and the page keeps the room."""
        narrow = event.size().width() < NARROW_WINDOW_PX
        width = self.narrow_sidebar_width() if narrow else SIDEBAR_WIDTH_PX
        if self.sidebar.width() != width:
            self.sidebar.setFixedWidth(width)
        super().resizeEvent(event)

    def add_page(self, name: str, title: str, widget: QWidget) -> None:
        """Add a page under a short name used by --page. A page taller or wider than the window
        (a 1280x720 projector) scrolls instead of forcing the window past the screen."""
        self._pages[name] = widget
        guard_form(widget)  # every page scrolls under the wheel; its fields change only when chosen
        item = QListWidgetItem(title)
        item.setSizeHint(QSize(160, 46))
        self.sidebar.addItem(item)
        holder = QScrollArea()
        holder.setObjectName(f"PageScroll_{name}")
        holder.setFrameShape(QFrame.Shape.NoFrame)
        holder.setWidgetResizable(True)
        holder.setWidget(widget)
        self._holders[name] = holder
        self.stack.addWidget(holder)
        row = self.sidebar.count() - 1
        if row < 9:  # Ctrl+1 … Ctrl+9 switch pages, as in a browser
            keys = QKeySequence(f"Ctrl+{row + 1}")
            if row not in self._page_keys:  # a reset window keeps its shortcuts: they name rows, not pages
                self._page_keys[row] = QShortcut(keys, self, functools.partial(self.sidebar.setCurrentRow, row))
            item.setToolTip(f"{title} ({keys.toString(QKeySequence.SequenceFormat.NativeText)})")
        if self.sidebar.count() == 1:
            self.sidebar.setCurrentRow(0)

    def show_page(self, name: str) -> None:
        """Switch to a page by its short name."""
        self.sidebar.setCurrentRow(self.stack.indexOf(self._holders[name]))

    def current_page(self) -> QWidget | None:
        """The page on show (the widget added, not its scroll holder)."""
        holder = self.stack.currentWidget()
        return holder.widget() if isinstance(holder, QScrollArea) else holder

    def current_page_name(self) -> str | None:
        """The short name of the page on show."""
        holder = self.stack.currentWidget()
        return next((name for name, h in self._holders.items() if h is holder), None)

    def page(self, name: str) -> QWidget:
        return self._pages[name]

    @property
    def page_names(self) -> list[str]:
        return list(self._pages)

    def toggle_full_screen(self) -> None:
        """F11: full screen for a projector, and back."""
        if self.isFullScreen():
            self.showNormal()
        else:
            self.showFullScreen()

    def fit_into_screen(self) -> None:
        """Shrink and move the window (its frame included, once it has one) into its screen's available
        area: a saved size or the default never opens it larger than the screen (a 1280x720 projector,
        or --scale 1.5 on a 1920x1080 one)."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is None or self.isFullScreen() or self.isMaximized():
            return
        area = screen.availableGeometry()
        frame, inner = self.frameGeometry(), self.geometry()
        extra_w, extra_h = frame.width() - inner.width(), frame.height() - inner.height()
        size = QSize(min(self.width(), area.width() - extra_w), min(self.height(), area.height() - extra_h))
        if size != self.size():
            self.resize(size)
        frame = self.frameGeometry()
        x = max(area.left(), min(frame.x(), area.left() + area.width() - frame.width()))
        y = max(area.top(), min(frame.y(), area.top() + area.height() - frame.height()))
        if (x, y) != (frame.x(), frame.y()):
            self.move(x, y)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt's name
        """Once shown (the window manager has framed it), fit the frame into the screen too."""
        super().showEvent(event)
        if not self._fitted_once:
            self._fitted_once = True
            QTimer.singleShot(FRAME_SETTLE_MS, self, functools.partial(self._fit_once_framed, FRAME_TRIES))

    def _fit_once_framed(self, tries_left: int) -> None:
        """Fit into the screen once the window manager has framed the window (a busy machine may take
        more than FRAME_SETTLE_MS: fitted unframed, the title bar pushes the bottom off the screen)."""
        unframed = self.frameGeometry() == self.geometry() and not (
            self.windowFlags() & Qt.WindowType.FramelessWindowHint)
        if unframed and tries_left > 1:
            QTimer.singleShot(FRAME_SETTLE_MS, self, functools.partial(self._fit_once_framed, tries_left - 1))
            return
        self.fit_into_screen()

    def leave_full_screen(self) -> None:
        """Esc: back from full screen; nothing when the window is not full screen."""
        if self.isFullScreen():
            self.showNormal()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        """Esc is taken only while full screen, so that it still reaches a page otherwise (in presenter mode the
        presenter's keys have it)."""
        if event.type() == QEvent.Type.WindowStateChange:
            self._leave_full_screen.setEnabled(self.isFullScreen() and not self.presenting)
        super().changeEvent(event)

    # ---- presenter mode ---------------------------------------------------------------------------
    def set_presenter(self, view: QWidget | None) -> None:
        """The view presenter mode shows (None: no presenter mode); a previous one is taken out (not deleted)."""
        if self.presenting:
            self.set_presenting(False)
        if self.presenter is not None:
            self._modes.removeWidget(self.presenter)
        self.presenter = view
        if view is not None:
            self._modes.addWidget(view)

    @property
    def presenting(self) -> bool:
        """True while the presenter's view is on show."""
        return self.presenter is not None and self._modes.currentWidget() is self.presenter

    def set_presenting(self, on: bool, *, full_screen: bool = True) -> None:
        """Show the presenter's view (full screen unless told not to) or the panel again (leaving full screen
        only if presenter mode entered it)."""
        if on == self.presenting or (on and self.presenter is None):
            return
        if on:
            assert self.presenter is not None
            self._was_full_screen = self.isFullScreen()
            self._modes.setCurrentWidget(self.presenter)
            self._leave_full_screen.setEnabled(False)
            if full_screen and not self.isFullScreen():
                self.showFullScreen()
            self.presenter.setFocus()
        else:
            self._modes.setCurrentWidget(self._panel)
            if self.isFullScreen() and not self._was_full_screen:
                self.showNormal()
            self._leave_full_screen.setEnabled(self.isFullScreen())
        self.presenting_changed.emit(on)


def quit_keys() -> list[QKeySequence]:
    """The platform's Quit keys, with Ctrl+Q among them (some platforms bind none)."""
    keys = [k for k in QKeySequence.keyBindings(QKeySequence.StandardKey.Quit) if not k.isEmpty()]
    ctrl_q = QKeySequence("Ctrl+Q")
    return keys if ctrl_q in keys else [*keys, ctrl_q]
