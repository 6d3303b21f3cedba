"""The engine seam: one interface (`Engine`), the OpenVINO implementation and the IPC it runs on."""
