/* kc_gpu_models: NVIDIA's GPU models (those nodesim simulates and the operator checks MIG configs
 * against), with their MIG GPU-instance profiles as NVML reports them (profile id, instance limit,
 * memory, SMs, compute and memory slices, placements).
 *
 * Every device id NVIDIA's default mig-parted config (gpu-operator v26.7.0) names has a model
 * here. The H100 80GB HBM3 rows (ids, memory, SMs, placements) are what NVML reports on a real
 * GPU, and so are the H200's (nvidia-smi's MIG profile and placement lists, total memory); the
 * A100 40GB/80GB and A30 memory sizes follow nvidia-smi's figures. The rest (SMs of
 * the PCIe, NVL, H20 and Blackwell parts, memory of the Blackwell, GH200 and 96 GB profiles, the
 * RTX PRO 6000's ids) follow the profile names and the same slice geometry: approximate. */
#include "kc_gpu.h"

/* Placements, as a set of first memory slices (bit i: an instance may start at slice i). On GPUs
 * of 8 memory slices 1-slice profiles start at 0..6, doubled-memory 1-slice and 2-slice profiles
 * on even slices, 3- and 4-slice profiles take half the memory (0 or 4), 7-slice ones all of it. */
#define AT8_1   0x7Fu /* 0 1 2 3 4 5 6 */
#define AT8_1M2 0x55u /* 0 2 4 6 */
#define AT8_2   0x15u /* 0 2 4 */
#define AT8_3   0x11u /* 0 4 */
#define AT8_4   0x01u /* 0 */
#define AT8_7   0x01u /* 0 */
/* ... and on GPUs of 4 memory slices (A30, RTX PRO 6000). */
#define AT4_1 0x0Fu /* 0 1 2 3 */
#define AT4_2 0x05u /* 0 2 */
#define AT4_4 0x01u /* 0 */

/* The seven profiles of a GPU of 7 compute and 8 memory slices, by name, with the memory (MiB)
 * of a 1-slice, a doubled-memory (1g and 2g), a half (3g and 4g) and a whole instance, and the
 * SMs of each. Field order: name, id, max, MiB, SMs, compute, memory slices, +me, placements. */
#define EIGHT_SLICE(...) EIGHT_SLICE_(__VA_ARGS__)
#define EIGHT_SLICE_(n1, n1me, n1m2, n2, n3, n4, n7, mib1, mib2, mib4, mib8, sm1, sm1m2, sm2, sm3, \
                     sm4, sm7)                                                                     \
    {n1, 19, 7, mib1, sm1, 1, 1, 0, AT8_1}, {n1me, 20, 1, mib1, sm1, 1, 1, 1, AT8_1},              \
        {n1m2, 15, 4, mib2, sm1m2, 1, 2, 0, AT8_1M2}, {n2, 14, 3, mib2, sm2, 2, 2, 0, AT8_2},      \
        {n3, 9, 2, mib4, sm3, 3, 4, 0, AT8_3}, {n4, 5, 1, mib4, sm4, 4, 4, 0, AT8_4},              \
        {n7, 0, 1, mib8, sm7, 7, 8, 0, AT8_7},

/* SMs per profile on Ampere (A100) and Hopper (as measured on an H100 80GB HBM3). */
#define SM_AMPERE    14, 14, 28, 42, 56, 98
#define SM_HOPPER    16, 26, 32, 60, 64, 132
#define SM_BLACKWELL 18, 18, 36, 54, 72, 126

static const kc_mig_profile a100_40gb[] = {EIGHT_SLICE("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb",
                                                       "3g.20gb", "4g.20gb", "7g.40gb", 4864, 9856,
                                                       19968, 40192, SM_AMPERE)};
static const kc_mig_profile a100_80gb[] = {EIGHT_SLICE("1g.10gb", "1g.10gb+me", "1g.20gb",
                                                       "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
                                                       9984, 19968, 40192, 80896, SM_AMPERE)};
static const kc_mig_profile h100_80gb[] = {EIGHT_SLICE("1g.10gb", "1g.10gb+me", "1g.20gb",
                                                       "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
                                                       9984, 20096, 40448, 81152, SM_HOPPER)};
static const kc_mig_profile h100_nvl[] = {EIGHT_SLICE("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb",
                                                      "3g.47gb", "4g.47gb", "7g.94gb", 11008, 22272,
                                                      47488, 95360, SM_HOPPER)};
/* H100 96GB, GH200 (96GB HBM3), H20 and PG506-96GB share one set of names. */
static const kc_mig_profile hbm_96gb[] = {EIGHT_SLICE("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb",
                                                      "3g.48gb", "4g.48gb", "7g.96gb", 11264, 22528,
                                                      46592, 94208, SM_HOPPER)};
/* As nvidia-smi lists them on a real H200 (driver 580.159.04): 16.00, 32.50, 69.75 and 140.00 GiB;
 * ids, SMs and placements the same as the H100's. */
static const kc_mig_profile h200[] = {EIGHT_SLICE("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb",
                                                  "3g.71gb", "4g.71gb", "7g.141gb", 16384, 33280,
                                                  71424, 143360, SM_HOPPER)};
static const kc_mig_profile gh200_144gb[] = {
    EIGHT_SLICE("1g.18gb", "1g.18gb+me", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb",
                16896, 33792, 71680, 143360, SM_HOPPER)};
static const kc_mig_profile b200[] = {EIGHT_SLICE("1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb",
                                                  "3g.90gb", "4g.90gb", "7g.180gb", 23552, 46080,
                                                  92160, 184320, SM_BLACKWELL)};
static const kc_mig_profile gb200[] = {EIGHT_SLICE("1g.23gb", "1g.23gb+me", "1g.47gb", "2g.47gb",
                                                   "3g.93gb", "4g.93gb", "7g.186gb", 23552, 48128,
                                                   95232, 190464, SM_BLACKWELL)};
static const kc_mig_profile b300[] = {EIGHT_SLICE("1g.34gb", "1g.34gb+me", "1g.67gb", "2g.67gb",
                                                  "3g.135gb", "4g.135gb", "7g.269gb", 34816, 68608,
                                                  138240, 275456, SM_BLACKWELL)};
static const kc_mig_profile gb300[] = {EIGHT_SLICE("1g.35gb", "1g.35gb+me", "1g.70gb", "2g.70gb",
                                                   "3g.139gb", "4g.139gb", "7g.278gb", 35840, 71680,
                                                   142336, 284672, SM_BLACKWELL)};
/* A30: 4 compute and 4 memory slices, with a +me variant of the 2-slice profile too. */
static const kc_mig_profile a30[] = {
    {"1g.6gb", 14, 4, 5836, 14, 1, 1, 0, AT4_1},  {"1g.6gb+me", 21, 1, 5836, 14, 1, 1, 1, AT4_1},
    {"2g.12gb", 5, 2, 11672, 28, 2, 2, 0, AT4_2}, {"2g.12gb+me", 6, 1, 11672, 28, 2, 2, 1, AT4_2},
    {"4g.24gb", 0, 1, 23344, 56, 4, 4, 0, AT4_4},
};
/* RTX PRO 6000 Blackwell: 4 slices; graphics (+gfx), all-media (+me.all) and no-media (-me)
 * variants beside the plain profiles. */
static const kc_mig_profile rtx_pro_6000[] = {
    {"1g.24gb", -1, 4, 24064, 46, 1, 1, 0, AT4_1},
    {"1g.24gb+me", -1, 1, 24064, 46, 1, 1, 1, AT4_1},
    {"1g.24gb+gfx", -1, 4, 24064, 46, 1, 1, 0, AT4_1},
    {"1g.24gb+me.all", -1, 1, 24064, 46, 1, 1, 1, AT4_1},
    {"1g.24gb-me", -1, 4, 24064, 46, 1, 1, 0, AT4_1},
    {"2g.48gb", -1, 2, 48128, 94, 2, 2, 0, AT4_2},
    {"2g.48gb+gfx", -1, 2, 48128, 94, 2, 2, 0, AT4_2},
    {"2g.48gb+me.all", -1, 1, 48128, 94, 2, 2, 1, AT4_2},
    {"2g.48gb-me", -1, 2, 48128, 94, 2, 2, 0, AT4_2},
    {"4g.96gb", -1, 1, 96768, 188, 4, 4, 0, AT4_4},
    {"4g.96gb+gfx", -1, 1, 96768, 188, 4, 4, 0, AT4_4},
};

#define PROFILES(p)  (p), sizeof(p) / sizeof((p)[0])
#define MIG8(p)      1, 7, 8, PROFILES(p)
#define MIG4(p)      1, 4, 4, PROFILES(p)
#define NO_MIG       0, 0, 0, NULL, 0
#define AMPERE       "ampere", 8, 0
#define HOPPER       "hopper", 9, 0
#define BLACKWELL(m) "blackwell", 10, (m)

/* Whole-GPU memory is the marketed size in GiB × 1024 (GFD would report NVML's slightly smaller
 * figure; the simulation does not need that precision). Two device ids sell as A100-PCIE-40GB:
 * the second is told apart by its id in our name. */
const kc_gpu_model kc_gpu_models[] = {
    {"A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB", 0x20B010DE, 40960, AMPERE, MIG8(a100_40gb)},
    {"A100-PCIE-40GB", "NVIDIA-A100-PCIE-40GB", 0x20F110DE, 40960, AMPERE, MIG8(a100_40gb)},
    {"A100-PCIE-40GB-20B1", "NVIDIA-A100-PCIE-40GB", 0x20B110DE, 40960, AMPERE, MIG8(a100_40gb)},
    {"A800-PCIE-40GB", "NVIDIA-A800-40GB-PCIe", 0x20F610DE, 40960, AMPERE, MIG8(a100_40gb)},
    {"A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB", 0x20B210DE, 81920, AMPERE, MIG8(a100_80gb)},
    {"A100-PCIE-80GB", "NVIDIA-A100-80GB-PCIe", 0x20B510DE, 81920, AMPERE, MIG8(a100_80gb)},
    {"A800-SXM4-80GB", "NVIDIA-A800-SXM4-80GB", 0x20F310DE, 81920, AMPERE, MIG8(a100_80gb)},
    {"A800-PCIE-80GB", "NVIDIA-A800-80GB-PCIe", 0x20F510DE, 81920, AMPERE, MIG8(a100_80gb)},
    {"A30", "NVIDIA-A30", 0x20B710DE, 24576, AMPERE, MIG4(a30)},
    {"PG506-96GB", "NVIDIA-PG506-96GB", 0x20B610DE, 98304, AMPERE, MIG8(hbm_96gb)},
    {"H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3", 0x233010DE, 81920, HOPPER, MIG8(h100_80gb)},
    {"H100-PCIe", "NVIDIA-H100-PCIe", 0x233110DE, 81920, HOPPER, MIG8(h100_80gb)},
    {"H800-PCIe", "NVIDIA-H800-PCIe", 0x232210DE, 81920, HOPPER, MIG8(h100_80gb)},
    {"H800-80GB-HBM3", "NVIDIA-H800", 0x232410DE, 81920, HOPPER, MIG8(h100_80gb)},
    {"H100-NVL", "NVIDIA-H100-NVL", 0x232110DE, 96256, HOPPER, MIG8(h100_nvl)},
    {"H800-NVL", "NVIDIA-H800-NVL", 0x233A10DE, 96256, HOPPER, MIG8(h100_nvl)},
    {"H100-96GB-HBM3", "NVIDIA-H100-96GB-HBM3", 0x233D10DE, 98304, HOPPER, MIG8(hbm_96gb)},
    {"GH200-96GB", "NVIDIA-GH200-480GB", 0x234210DE, 98304, HOPPER, MIG8(hbm_96gb)},
    {"H20", "NVIDIA-H20", 0x232910DE, 98304, HOPPER, MIG8(hbm_96gb)},
    {"H200", "NVIDIA-H200", 0x233510DE, 143771, HOPPER, MIG8(h200)},
    {"H200-NVL", "NVIDIA-H200-NVL", 0x233B10DE, 144384, HOPPER, MIG8(h200)},
    {"GH200-144GB", "NVIDIA-GH200-144G-HBM3e", 0x234810DE, 147456, HOPPER, MIG8(gh200_144gb)},
    {"B200", "NVIDIA-B200", 0x290110DE, 184320, BLACKWELL(0), MIG8(b200)},
    {"GB200", "NVIDIA-GB200", 0x294110DE, 190464, BLACKWELL(0), MIG8(gb200)},
    {"B300", "NVIDIA-B300-SXM6-AC", 0x318210DE, 275456, BLACKWELL(3), MIG8(b300)},
    {"GB300", "NVIDIA-GB300", 0x31C210DE, 284672, BLACKWELL(3), MIG8(gb300)},
    {"RTX-PRO-6000", "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", 0x2BB510DE, 98304, "blackwell",
     12, 0, MIG4(rtx_pro_6000)},
    {"Tesla-T4", "Tesla-T4", 0x1EB810DE, 16384, "turing", 7, 5, NO_MIG},
    {"Tesla-V100-SXM2-16GB", "Tesla-V100-SXM2-16GB", 0x1DB110DE, 16384, "volta", 7, 0, NO_MIG},
    {"L4", "NVIDIA-L4", 0x27B810DE, 24576, "ada-lovelace", 8, 9, NO_MIG},
};
const size_t kc_gpu_n_models = sizeof(kc_gpu_models) / sizeof(kc_gpu_models[0]);
