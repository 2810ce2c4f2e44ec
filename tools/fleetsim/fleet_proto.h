// The simulated fleet in the API's terms: what a scheduler would register for a simulated job
// and what a node agent would push for a simulated sample. Used by goodput-demo and the
// end-to-end tests that drive the real services with the simulator.
#pragma once

#include <string>
#include <vector>

#include "goodput/v1/ingest.pb.h"
#include "goodput/v1/job.pb.h"
#include "tools/fleetsim/fleet_sim.h"

namespace goodput::sim {

// The RegisterJob request a Slurm prolog would send for `job` on `cluster`: a running job
// whose allocation is the (host, device) pairs seen in `samples`, from the job's start.
v1::RegisterJobRequest RegisterJobRequestFor(const std::string& cluster, const JobTruth& job,
                                             const std::vector<GpuSample>& samples);

// Fills `out` with the DCGM fields of `sample`, for a GPU of `gpu_model`.
void SampleToProto(const GpuSample& sample, const std::string& gpu_model, v1::GpuSample* out);

}  // namespace goodput::sim
