//! Launcher: runs the whole crdplane stack locally (crdplane up)
