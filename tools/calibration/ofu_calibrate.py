#!/usr/bin/env python3
"""OFU calibration on a real GPU: measured GEMM throughput vs tensor activity x clock.

Runs a few matrix-product workloads on GPU 0 for a fixed time each and, meanwhile, reads
what DCGM would export: tensor-pipe activity (NVML GPU Performance Monitoring, the source
dcgm-exporter's DCGM_FI_PROF_PIPE_TENSOR_ACTIVE comes from on Hopper and later) over 1 s
windows, and the instantaneous SM clock (DCGM_FI_DEV_SM_CLOCK) every 100 ms. For each
workload it prints

    measured MFU = achieved TFLOP/s (2*M*N*K per product, timed with CUDA events)
                   / dense peak of that precision
    OFU          = mean(tensor_active x sm_clock_mhz / tensor_fmax_mhz)      (domain.md eq. 1)

and writes every sample to a JSON file so the comparison can be replayed by the unit tests
(tests/data/calibration/). Needs PyTorch with CUDA and nvidia-ml-py (pynvml).

    python3 tools/calibration/ofu_calibrate.py --out calib.json [--seconds 8]
"""
import argparse
import json
import subprocess
import sys
import threading
import time

import pynvml as nv
import torch

# Dense peaks and tensor clocks by the names nvidia-smi prints (domain.md section 1).
MODELS = {
    "NVIDIA H100 80GB HBM3": {"sms": 132, "tensor_fmax_mhz": 1830, "bf16_tflops": 989.4},
    "NVIDIA H200": {"sms": 132, "tensor_fmax_mhz": 1830, "bf16_tflops": 989.4},
}
PRECISION_FACTOR = {"bf16": 1.0, "fp16": 1.0, "fp8": 2.0, "tf32": 0.5, "fp32": 0.5}


def gpm_metric_ids():
    names = ["ANY_TENSOR_UTIL", "HMMA_TENSOR_UTIL", "SM_UTIL", "SM_OCCUPANCY", "DRAM_BW_UTIL"]
    return {n: getattr(nv, "NVML_GPM_METRIC_" + n) for n in names if hasattr(nv, "NVML_GPM_METRIC_" + n)}


class Sampler(threading.Thread):
    """Reads SM clock/power every 100 ms and GPM tensor activity every 1 s."""

    def __init__(self, handle, use_gpm):
        super().__init__(daemon=True)
        self.h = handle
        self.use_gpm = use_gpm
        self.stop_flag = threading.Event()
        self.clock = []  # (t, sm_mhz, power_w)
        self.gpm = []  # (t_start, t_end, {metric: percent})
        self.ids = gpm_metric_ids()

    def gpm_between(self, s1, s2):
        mg = nv.c_nvmlGpmMetricsGet_t()
        mg.version = nv.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(self.ids)
        mg.sample1 = s1
        mg.sample2 = s2
        for i, mid in enumerate(self.ids.values()):
            mg.metrics[i].metricId = mid
        nv.nvmlGpmMetricsGet(mg)
        return {name: float(mg.metrics[i].value) for i, name in enumerate(self.ids)}

    def run(self):
        s_prev = s_next = None
        t_prev = None
        if self.use_gpm:
            s_prev, s_next = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
            nv.nvmlGpmSampleGet(self.h, s_prev)
            t_prev = time.time()
        tick = 0
        while not self.stop_flag.is_set():
            time.sleep(0.1)
            tick += 1
            now = time.time()
            sm = nv.nvmlDeviceGetClockInfo(self.h, nv.NVML_CLOCK_SM)
            power_w = nv.nvmlDeviceGetPowerUsage(self.h) / 1000.0
            self.clock.append((now, sm, power_w))
            if self.use_gpm and tick % 10 == 0:
                nv.nvmlGpmSampleGet(self.h, s_next)
                self.gpm.append((t_prev, now, self.gpm_between(s_prev, s_next)))
                s_prev, s_next, t_prev = s_next, s_prev, now


def make_case(name, m, n, k, dtype, duty=1.0):
    return {"name": name, "m": m, "n": n, "k": k, "dtype": dtype, "duty": duty}


def run_case(case, seconds, sampler):
    dev = torch.device("cuda")
    m, n, k = case["m"], case["n"], case["k"]
    dt = case["dtype"]
    if dt == "fp8":
        a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev)
        op = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    else:
        torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
        tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}[dt]
        a = torch.randn(m, k, device=dev, dtype=tdt)
        b = torch.randn(k, n, device=dev, dtype=tdt)
        op = lambda: torch.matmul(a, b)
    for _ in range(5):
        op()
    torch.cuda.synchronize()
    # Products per burst: about 50 ms of work, measured once.
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(10):
        op()
    e1.record()
    torch.cuda.synchronize()
    per_op_s = e0.elapsed_time(e1) / 1000.0 / 10
    burst = max(1, int(0.05 / per_op_s))

    products = 0
    gpu_busy_s = 0.0
    t0 = time.time()
    while time.time() - t0 < seconds:
        e0.record()
        for _ in range(burst):
            op()
        e1.record()
        torch.cuda.synchronize()
        products += burst
        elapsed = e0.elapsed_time(e1) / 1000.0
        gpu_busy_s += elapsed
        if case["duty"] < 1.0:
            time.sleep(elapsed * (1.0 - case["duty"]) / case["duty"])
    t1 = time.time()
    flops = 2.0 * m * n * k * products
    clocks = [c for c in sampler.clock if t0 + 0.5 <= c[0] <= t1]
    gpm = [g for g in sampler.gpm if g[0] >= t0 + 0.5 and g[1] <= t1]
    return {
        **case,
        "wall_s": t1 - t0,
        "gpu_busy_s": gpu_busy_s,
        "products": products,
        "achieved_tflops": flops / (t1 - t0) / 1e12,
        "clock_samples": [{"t": c[0] - t0, "sm_clock_mhz": c[1], "power_w": c[2]} for c in clocks],
        "gpm_windows": [{"t_start": g[0] - t0, "t_end": g[1] - t0, **g[2]} for g in gpm],
    }


def summarize(r, model):
    peak = model["bf16_tflops"] * PRECISION_FACTOR[r["dtype"]]
    mfu = r["achieved_tflops"] / peak
    sm = [c["sm_clock_mhz"] for c in r["clock_samples"]]
    tens = [g.get("ANY_TENSOR_UTIL", float("nan")) / 100.0 for g in r["gpm_windows"]]
    ofu = float("nan")
    if tens and sm:
        # Pair each 1 s activity window with the clock point samples inside it, as a scraper
        # would pair one activity value with one clock value.
        vals = []
        for g in r["gpm_windows"]:
            inside = [c["sm_clock_mhz"] for c in r["clock_samples"] if g["t_start"] <= c["t"] <= g["t_end"]]
            if inside:
                vals.append(g.get("ANY_TENSOR_UTIL", 0.0) / 100.0 * inside[-1] / model["tensor_fmax_mhz"])
        ofu = sum(vals) / len(vals) if vals else float("nan")
    return {
        "case": r["name"],
        "peak_tflops": peak,
        "achieved_tflops": r["achieved_tflops"],
        "measured_mfu": mfu,
        "tensor_active_mean": sum(tens) / len(tens) if tens else float("nan"),
        "sm_clock_mean_mhz": sum(sm) / len(sm) if sm else float("nan"),
        "ofu": ofu,
        "ofu_over_mfu": ofu / mfu if mfu > 0 else float("nan"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args()

    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    name = nv.nvmlDeviceGetName(h)
    name = name.decode() if isinstance(name, bytes) else name
    model = MODELS.get(name)
    if model is None:
        print(f"ofu_calibrate: GPU model {name!r} has no peak in this script", file=sys.stderr)
        return 2
    use_gpm = False
    try:
        sup = nv.nvmlGpmQueryDeviceSupport(h)
        use_gpm = bool(sup.isSupportedDevice)
    except Exception as e:  # noqa: BLE001 - report and go on with clocks only
        print(f"ofu_calibrate: GPM not available: {e}", file=sys.stderr)
    info = {
        "gpu": name,
        "driver": nv.nvmlSystemGetDriverVersion(),
        "max_sm_clock_mhz": nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
        "gpm_supported": use_gpm,
        "torch": torch.__version__,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model_constants": model,
    }
    print(json.dumps(info), flush=True)

    cases = [
        make_case("bf16 8192x8192x8192", 8192, 8192, 8192, "bf16"),
        make_case("bf16 8192^3 at 50% duty", 8192, 8192, 8192, "bf16", duty=0.5),
        make_case("bf16 16384x256x16384 (small N)", 16384, 256, 16384, "bf16"),
        make_case("bf16 8192x8000x8192 (N not tile-aligned)", 8192, 8000, 8192, "bf16"),
        make_case("fp8 8192x8192x8192", 8192, 8192, 8192, "fp8"),
        make_case("tf32 8192x8192x8192", 8192, 8192, 8192, "tf32"),
        make_case("fp32 4096^3 (no tensor cores)", 4096, 4096, 4096, "fp32"),
    ]
    sampler = Sampler(h, use_gpm)
    sampler.start()
    results, rows = [], []
    for c in cases:
        try:
            r = run_case(c, args.seconds, sampler)
        except Exception as e:  # noqa: BLE001 - one failing precision must not lose the rest
            print(f"ofu_calibrate: case {c['name']}: {e}", file=sys.stderr, flush=True)
            continue
        results.append(r)
        s = summarize(r, model)
        rows.append(s)
        print(json.dumps(s), flush=True)
        time.sleep(1.0)
    sampler.stop_flag.set()
    sampler.join()

    print()
    print(f"{'case':<44} {'TFLOP/s':>8} {'MFU':>7} {'tensor':>7} {'SM MHz':>7} {'OFU':>7} {'OFU/MFU':>8}")
    for s in rows:
        print(f"{s['case']:<44} {s['achieved_tflops']:8.1f} {s['measured_mfu']*100:6.1f}% "
              f"{s['tensor_active_mean']*100:6.1f}% {s['sm_clock_mean_mhz']:7.0f} {s['ofu']*100:6.1f}% "
              f"{s['ofu_over_mfu']:8.3f}")
    try:
        info["nvidia_smi_clocks"] = subprocess.run(["nvidia-smi", "-q", "-d", "CLOCK"], capture_output=True,
                                                   text=True, timeout=20).stdout
    except Exception:  # noqa: BLE001
        pass
    with open(args.out, "w") as f:
        json.dump({"info": info, "summary": rows, "cases": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
