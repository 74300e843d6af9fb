/* Tests for ns_fleet (the fleet file) and ns_fault (fault specs). */
#include <criterion/criterion.h>
#include <string.h>

#include "ns_fault.h"
#include "ns_fleet.h"

static ns_fleet *parse_ok(const char *yaml)
{
    ns_fleet *f = NULL;
    kc_err err;
    cr_assert_eq(ns_fleet_parse(yaml, strlen(yaml), NULL, &f, &err), KC_OK, "%s", err.msg);
    return f;
}

static void rejects(const char *yaml, const char *msg)
{
    ns_fleet *f = (ns_fleet *)1;
    kc_err err;
    kc_code rc = ns_fleet_parse(yaml, strlen(yaml), NULL, &f, &err);
    cr_assert_neq(rc, KC_OK, "%s", yaml);
    cr_assert_null(f);
    cr_assert(strstr(err.msg, msg), "message [%s] lacks [%s]", err.msg, msg);
}

Test(fleet, issue_example)
{
    ns_fleet *f = parse_ok("nodes:\n"
                           "  - name: p4d\n    count: 2\n    gpu: A100-SXM4-40GB\n    gpus: 8\n"
                           "  - name: t4\n    count: 1\n    gpu: Tesla-T4\n    gpus: 4\n"
                           "  - name: cpu\n    count: 1\n");
    cr_assert_eq(f->n_groups, 3);
    cr_assert_eq(f->n_nodes, 4);
    cr_assert_str_eq(f->groups[0].model->name, "A100-SXM4-40GB");
    cr_assert_eq(f->groups[0].gpus, 8);
    cr_assert_str_eq(f->groups[1].model->product, "Tesla-T4");
    cr_assert_null(f->groups[2].model);
    cr_assert_eq(f->groups[2].gpus, 0);
    char name[64];
    ns_fleet_node_name(&f->groups[0], 1, name, sizeof(name));
    cr_assert_str_eq(name, "p4d-1");
    /* Defaults. */
    cr_assert_str_eq(f->groups[0].cpu, "8");
    cr_assert_str_eq(f->groups[0].os_id, "ubuntu");
    cr_assert_str_eq(f->groups[0].os_image, "Ubuntu 22.04 LTS");
    cr_assert_eq(f->groups[0].driver, NS_PROV_CONTAINER);
    ns_fleet_free(f);
}

Test(fleet, gfd_spelling_and_every_key)
{
    ns_fleet *f = parse_ok("nodes:\n"
                           "- name: h\n  gpu: NVIDIA-H100-80GB-HBM3\n  gpus: 2\n  cpu: 64\n"
                           "  memory: 512Gi\n  pods: 250\n  runtime: cri-o://1.30.0\n"
                           "  kernel: 6.8.0-45-generic\n  os: {id: rhel, version: \"9.4\"}\n"
                           "  driver-version: 560.35.03\n  cuda-version: \"12.6\"\n"
                           "  driver: host\n  toolkit: host\n  mig-needs-reboot: true\n"
                           "  labels: {zone: a}\n  annotations: {note: x}\n"
                           "  taints: [{key: nvidia.com/gpu, effect: NoSchedule}]\n");
    const ns_fleet_group *g = &f->groups[0];
    cr_assert_str_eq(g->model->name, "H100-80GB-HBM3");
    cr_assert_eq(g->has_count, false);
    char name[64];
    ns_fleet_node_name(g, 0, name, sizeof(name));
    cr_assert_str_eq(name, "h");
    cr_assert_str_eq(g->cpu, "64");
    cr_assert_str_eq(g->pods, "250");
    cr_assert_str_eq(g->os_image, "Red Hat Enterprise Linux 9.4");
    cr_assert_eq(g->driver, NS_PROV_HOST);
    cr_assert(g->mig_needs_reboot);
    cr_assert_eq(json_array_size(g->taints), 1);
    cr_assert_str_eq(json_string_value(json_object_get(g->labels, "zone")), "a");
    ns_fleet_free(f);
}

Test(fleet, rejects_bad_input_precisely)
{
    rejects("nodes: 3\n", "expected a top-level `nodes:` list");
    rejects("nodes: []\nextra: 1\n", "unknown top-level key \"extra\"");
    rejects("nodes:\n- count: 1\n", "nodes[0].name: Required value");
    rejects("nodes:\n- name: n\n", "nodes[0].name: expected a non-empty string");
    rejects("nodes:\n- name: Big\n", "is not a valid node name prefix");
    rejects("nodes:\n- name: a\n  count: -1\n", "nodes[0].count: expected an integer 0-100000");
    rejects("nodes:\n- name: a\n  gpu: A999\n",
            "nodes[0].gpu: unknown GPU model \"A999\" (known: ");
    rejects("nodes:\n- name: a\n  gpu: L4\n  gpus: 0\n", "nodes[0].gpus: expected an integer 1-16");
    rejects("nodes:\n- name: a\n  gpus: 2\n", "nodes[0].gpus: needs a gpu model");
    rejects("nodes:\n- name: a\n  colour: red\n", "nodes[0]: unknown key \"colour\"");
    rejects("nodes:\n- name: a\n  labels: {x: true}\n", "nodes[0].labels.x: expected a string");
    rejects("nodes:\n- name: a\n  taints: [{key: k, effect: Never}]\n",
            "nodes[0].taints[0].effect: expected NoSchedule");
    rejects("nodes:\n- name: a\n  driver: maybe\n", "nodes[0].driver: expected \"container\"");
    rejects("nodes:\n- name: a\n  gpu: T4\n  mig-needs-reboot: true\n",
            "nodes[0].mig-needs-reboot: the group's GPUs do not support MIG");
    rejects("nodes:\n- name: a\n  os: ubuntu\n", "nodes[0].os: expected {id: ubuntu");
    rejects("nodes:\n- name: a\n  driver-version: abc\n", "is not MAJOR.MINOR[.REVISION]");
    rejects("nodes:\n- name: a\n- name: a\n",
            "nodes[1].name: \"a\" is already the name of nodes[0]");
    rejects("nodes:\n- name: a\n  cpu: \"\"\n", "nodes[0].cpu: \"\" must be non-empty");
    rejects("nodes: [\n", ""); /* YAML syntax: the parser's message */
}

Test(fault, grammar)
{
    ns_faults f;
    kc_err err;
    cr_assert_eq(ns_fault_parse(NULL, 8, &f, &err), KC_OK);
    cr_assert(ns_fault_none(&f));
    cr_assert_eq(ns_fault_parse("xid:gpu=3:code=79, gpu-lost ,slow:factor=5,notready", 8, &f, &err),
                 KC_OK, "%s", err.msg);
    cr_assert_eq(f.xid_gpus, 1u << 3);
    cr_assert_eq(f.xid_code[3], 79);
    cr_assert_eq(f.lost_gpus, 1u << 7, "gpu-lost defaults to the last GPU");
    cr_assert_eq(f.slow_factor, 5);
    cr_assert(f.notready);
    cr_assert_not(f.driver_fail);
    cr_assert_eq(ns_fault_count_bits(0x85u, 8), 3);
    cr_assert_eq(ns_fault_parse("xid", 2, &f, &err), KC_OK);
    cr_assert_eq(f.xid_code[0], 13);
    cr_assert_eq(ns_fault_parse("driver-fail,mig-fail,mig-hang", 0, &f, &err), KC_OK);
    cr_assert(f.driver_fail && f.mig_fail && f.mig_hang);
}

static void fault_rejects(const char *spec, int gpus, const char *msg)
{
    ns_faults f;
    kc_err err;
    cr_assert_eq(ns_fault_parse(spec, gpus, &f, &err), KC_EINVALID, "%s", spec);
    cr_assert(ns_fault_none(&f), "a refused spec leaves no fault");
    cr_assert_str_eq(err.msg, msg);
}

Test(fault, rejects_precisely)
{
    fault_rejects("melt", 8,
                  "fault \"melt\": unknown fault \"melt\" (known: xid, gpu-lost, "
                  "driver-fail, mig-fail, mig-hang, notready, slow)");
    fault_rejects("xid:gpu=9", 8,
                  "fault \"xid:gpu=9\": gpu 9 does not exist (the node has 8 GPUs, 0-7)");
    fault_rejects("xid:gpu=x", 8, "fault \"xid:gpu=x\": gpu=x is not a GPU index");
    fault_rejects("xid:code=0", 8, "fault \"xid:code=0\": code=0 is not an XID code (1-1000)");
    fault_rejects("xid:gpu", 8, "fault \"xid:gpu\": option \"gpu\" is not key=value");
    fault_rejects("notready:x=1", 8, "fault \"notready:x=1\": notready takes no option \"x\"");
    fault_rejects("slow:factor=0", 8, "fault \"slow:factor=0\": factor=0 is not an integer 1-1000");
    fault_rejects("gpu-lost", 0, "fault \"gpu-lost\": the node has no GPUs");
    fault_rejects("xid,:", 8, "fault \":\": empty entry");
}
