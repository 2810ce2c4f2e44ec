#!/usr/bin/env python3
"""Bottleneck-class calibration on a real GPU: what the DCGM profiling fields read for
workloads of known bottleneck (services/core/bottleneck.h).

Runs, one after another on GPU 0 for a fixed time each: nothing (idle), a loop of tiny
kernels (launch-bound), a CPU-heavy "data loader" feeding full matrix products (input-bound),
a device-to-device copy loop (memory-bound), host-to-device copies from pinned memory
(PCIe-bound), and bf16 matrix products (compute-bound). Meanwhile it reads, over consecutive
1-s windows, the NVML GPU Performance Monitoring metrics dcgm-exporter's profiling fields come
from on Hopper and later: GRAPHICS_UTIL (DCGM_FI_PROF_GR_ENGINE_ACTIVE), SM_UTIL
(DCGM_FI_PROF_SM_ACTIVE), SM_OCCUPANCY (DCGM_FI_PROF_SM_OCCUPANCY), ANY_TENSOR_UTIL
(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE), DRAM_BW_UTIL (DCGM_FI_PROF_DRAM_ACTIVE) and PCIe
bytes/s (DCGM_FI_PROF_PCIE_TX/RX_BYTES), and writes every window to a JSON file that the unit
tests replay (tests/data/calibration/). Needs PyTorch with CUDA and nvidia-ml-py (pynvml).

    python3 tools/calibration/bottleneck_calibrate.py --out bottleneck.json [--seconds 6]
"""
import argparse
import json
import subprocess
import threading
import time

import pynvml as nv
import torch

METRICS = {
    "gr_engine_active": "GRAPHICS_UTIL",
    "sm_active": "SM_UTIL",
    "sm_occupancy": "SM_OCCUPANCY",
    "tensor_active": "ANY_TENSOR_UTIL",
    "dram_active": "DRAM_BW_UTIL",
    "pcie_tx_bytes_per_s": "PCIE_TX_PER_SEC",
    "pcie_rx_bytes_per_s": "PCIE_RX_PER_SEC",
}


class Sampler(threading.Thread):
    def __init__(self, handle):
        super().__init__(daemon=True)
        self.h = handle
        self.stop_flag = threading.Event()
        self.windows = []  # (t_start, t_end, {field: value})
        self.ids = {f: getattr(nv, "NVML_GPM_METRIC_" + m) for f, m in METRICS.items()
                    if hasattr(nv, "NVML_GPM_METRIC_" + m)}

    def between(self, s1, s2):
        mg = nv.c_nvmlGpmMetricsGet_t()
        mg.version = nv.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(self.ids)
        mg.sample1 = s1
        mg.sample2 = s2
        for i, mid in enumerate(self.ids.values()):
            mg.metrics[i].metricId = mid
        nv.nvmlGpmMetricsGet(mg)
        out = {}
        for i, field in enumerate(self.ids):
            v = float(mg.metrics[i].value)
            # Utilisations are percent; PCIe is MiB/s in NVML's GPM.
            out[field] = v * 1048576.0 if field.startswith("pcie") else v / 100.0
        return out

    def run(self):
        a, b = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
        nv.nvmlGpmSampleGet(self.h, a)
        t_prev = time.time()
        while not self.stop_flag.is_set():
            time.sleep(1.0)
            nv.nvmlGpmSampleGet(self.h, b)
            now = time.time()
            self.windows.append((t_prev, now, self.between(a, b)))
            a, b, t_prev = b, a, now


def idle(seconds):
    time.sleep(seconds)


def tiny_kernels(seconds):
    x = torch.zeros(32, device="cuda")
    t0 = time.time()
    n = 0
    while time.time() - t0 < seconds:
        for _ in range(200):
            x.add_(1.0)
        n += 200
        torch.cuda.synchronize()
    return {"kernels": n}


def cpu_loader(seconds):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    steps = 0
    while time.time() - t0 < seconds:
        # The "loader": 30 ms of Python work per batch on one host core.
        t = time.time()
        acc = 0
        while time.time() - t < 0.03:
            acc += sum(range(2000))
        for _ in range(4):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        steps += 1
    return {"steps": steps}


def d2d_copy(seconds):
    x = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
    y = torch.empty_like(x)
    t0 = time.time()
    n = 0
    while time.time() - t0 < seconds:
        for _ in range(20):
            y.copy_(x)
        torch.cuda.synchronize()
        n += 20
    return {"bytes_copied": n * (1 << 30)}


def h2d_copy(seconds):
    h = torch.empty(1 << 28, dtype=torch.uint8).pin_memory()
    d = torch.empty(1 << 28, device="cuda", dtype=torch.uint8)
    t0 = time.time()
    n = 0
    while time.time() - t0 < seconds:
        for _ in range(10):
            d.copy_(h, non_blocking=True)
        torch.cuda.synchronize()
        n += 10
    return {"bytes_copied": n * (1 << 28)}


def matmul(seconds):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    n = 0
    while time.time() - t0 < seconds:
        for _ in range(20):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        n += 20
    return {"products": n}


CASES = [
    ("idle", "idle", idle),
    ("tiny_kernel_loop", "launch_bound", tiny_kernels),
    ("cpu_heavy_loader", "input_bound", cpu_loader),
    ("d2d_memcpy_loop", "memory_bound", d2d_copy),
    ("h2d_pinned_copy_loop", "communication_bound", h2d_copy),
    ("bf16_matmul_8192", "compute_bound", matmul),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--seconds", type=float, default=6)
    args = p.parse_args()
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    torch.zeros(1, device="cuda")
    sampler = Sampler(h)
    sampler.start()
    cases = []
    for name, expected, fn in CASES:
        t0 = time.time()
        extra = fn(args.seconds) or {}
        t1 = time.time()
        time.sleep(1.2)  # the window that ends the case is complete
        windows = [w[2] for w in sampler.windows if w[0] >= t0 + 0.5 and w[1] <= t1]
        mean = {f: sum(w[f] for w in windows) / len(windows) for f in windows[0]} if windows else {}
        cases.append({"name": name, "expected": expected, "seconds": t1 - t0, **extra,
                      "windows": windows, "mean": mean})
        print(name, expected, {k: round(v, 3) if v < 1e3 else f"{v:.3g}" for k, v in mean.items()},
              flush=True)
    sampler.stop_flag.set()
    info = {
        "gpu": nv.nvmlDeviceGetName(h),
        "driver": nv.nvmlSystemGetDriverVersion(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "pcie_link": {"gen": nv.nvmlDeviceGetCurrPcieLinkGeneration(h),
                      "width": nv.nvmlDeviceGetCurrPcieLinkWidth(h)},
        "measured": time.strftime("%Y-%m-%d", time.gmtime()),
        "nvidia_smi": subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout,
    }
    with open(args.out, "w") as f:
        json.dump({"info": info, "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
