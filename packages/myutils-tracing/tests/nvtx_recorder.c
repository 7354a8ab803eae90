/* NVTX v3 injection library used by the myutils-tracing tests: it appends one line per NVTX
 * call to the file named by MYUTILS_NVTX_LOG, so a test can check the ranges the labelers emit.
 *
 * Line format (tab separated): <op> <domain> <message> <color as 8 hex digits> <category> <range id>
 * op is one of: domain, category, push, pop, start, end, mark. Unused fields are "-".
 * The default (NULL) domain is written as "<default>".
 * Built by tests/conftest.py:  gcc -shared -fPIC -I<nvidia-nvtx include dir> nvtx_recorder.c -lpthread
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nvtx3/nvToolsExt.h>

#define MAX_DOMAINS 128
#define MAX_STRINGS 8192

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static char *domain_names[MAX_DOMAINS];
static size_t domain_count;
static char *string_table[MAX_STRINGS];
static size_t string_count;
static uint64_t last_range_id;

static char *copy_text(const char *s) { return strdup(s ? s : ""); }

static const char *domain_label(nvtxDomainHandle_t d) {
    uintptr_t i = (uintptr_t)d;
    if (i == 0) return "<default>";
    return i <= domain_count ? domain_names[i - 1] : "<unknown>";
}

static const char *message_of(const nvtxEventAttributes_t *a) {
    if (a == NULL) return "-";
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) return a->message.ascii ? a->message.ascii : "";
    if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
        uintptr_t i = (uintptr_t)a->message.registered;
        return (i > 0 && i <= string_count) ? string_table[i - 1] : "<unregistered>";
    }
    return "-";
}

/* Writes one complete line under the lock, flushed, so a crashed child loses nothing written. */
static void record(const char *op, nvtxDomainHandle_t d, const char *msg, const nvtxEventAttributes_t *a,
                   uint64_t range_id) {
    char color[16] = "-", category[16] = "-", rid[24] = "-";
    if (a != NULL) {
        snprintf(color, sizeof color, "%08" PRIx32, a->color);
        snprintf(category, sizeof category, "%" PRIu32, a->category);
    }
    if (range_id != 0) snprintf(rid, sizeof rid, "%" PRIu64, range_id);
    pthread_mutex_lock(&lock);
    if (out != NULL) {
        fprintf(out, "%s\t%s\t%s\t%s\t%s\t%s\n", op, domain_label(d), msg, color, category, rid);
        fflush(out);
    }
    pthread_mutex_unlock(&lock);
}

static nvtxDomainHandle_t on_domain_create(const char *name) {
    uintptr_t handle = 0;
    pthread_mutex_lock(&lock);
    if (domain_count < MAX_DOMAINS) {
        domain_names[domain_count++] = copy_text(name);
        handle = domain_count;
    }
    pthread_mutex_unlock(&lock);
    record("domain", (nvtxDomainHandle_t)handle, "-", NULL, 0);
    return (nvtxDomainHandle_t)handle;
}

static nvtxStringHandle_t on_register_string(nvtxDomainHandle_t d, const char *s) {
    uintptr_t handle = 0;
    (void)d;
    pthread_mutex_lock(&lock);
    if (string_count < MAX_STRINGS) {
        string_table[string_count++] = copy_text(s);
        handle = string_count;
    }
    pthread_mutex_unlock(&lock);
    return (nvtxStringHandle_t)handle;
}

static void on_name_category(nvtxDomainHandle_t d, uint32_t id, const char *name) {
    char idtext[16];
    snprintf(idtext, sizeof idtext, "%" PRIu32, id);
    pthread_mutex_lock(&lock);
    if (out != NULL) {
        fprintf(out, "category\t%s\t%s\t-\t%s\t-\n", domain_label(d), name ? name : "", idtext);
        fflush(out);
    }
    pthread_mutex_unlock(&lock);
}

static int on_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { record("push", d, message_of(a), a, 0); return 0; }
static int on_pop(nvtxDomainHandle_t d) { record("pop", d, "-", NULL, 0); return 0; }
static void on_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { record("mark", d, message_of(a), a, 0); }

static nvtxRangeId_t on_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    pthread_mutex_lock(&lock);
    uint64_t id = ++last_range_id;
    pthread_mutex_unlock(&lock);
    record("start", d, message_of(a), a, id);
    return id;
}

static void on_end(nvtxDomainHandle_t d, nvtxRangeId_t id) { record("end", d, "-", NULL, id); }

/* Legacy (domain-less) entry points, used by torch.cuda.nvtx on CUDA builds. */
static int on_legacy_push_ascii(const char *m) { record("push", NULL, m ? m : "", NULL, 0); return 0; }
static int on_legacy_push_ex(const nvtxEventAttributes_t *a) { return on_push(NULL, a); }
static int on_legacy_pop(void) { return on_pop(NULL); }
static void on_legacy_mark_ascii(const char *m) { record("mark", NULL, m ? m : "", NULL, 0); }
static void on_legacy_mark_ex(const nvtxEventAttributes_t *a) { on_mark(NULL, a); }
static nvtxRangeId_t on_legacy_start_ascii(const char *m) {
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = m;
    return on_start(NULL, &a);
}
static nvtxRangeId_t on_legacy_start_ex(const nvtxEventAttributes_t *a) { return on_start(NULL, a); }
static void on_legacy_end(nvtxRangeId_t id) { on_end(NULL, id); }

static NvtxFunctionTable module_table(NvtxGetExportTableFunc_t get_table, NvtxCallbackModule module) {
    const NvtxExportTableCallbacks *callbacks = (const NvtxExportTableCallbacks *)get_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (callbacks == NULL || !callbacks->GetModuleFunctionTable(module, &table, &size)) return NULL;
    return table;
}

#define HOOK(table, slot, fn) (*(table)[slot] = (NvtxFunctionPointer)(fn))

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
    const char *path = getenv("MYUTILS_NVTX_LOG");
    NvtxFunctionTable core = module_table(get_table, NVTX_CB_MODULE_CORE);
    NvtxFunctionTable core2 = module_table(get_table, NVTX_CB_MODULE_CORE2);
    if (path == NULL || *path == 0 || core == NULL || core2 == NULL) return 0;
    out = fopen(path, "a");
    if (out == NULL) return 0;
    HOOK(core2, NVTX_CBID_CORE2_DomainCreateA, on_domain_create);
    HOOK(core2, NVTX_CBID_CORE2_DomainRegisterStringA, on_register_string);
    HOOK(core2, NVTX_CBID_CORE2_DomainNameCategoryA, on_name_category);
    HOOK(core2, NVTX_CBID_CORE2_DomainRangePushEx, on_push);
    HOOK(core2, NVTX_CBID_CORE2_DomainRangePop, on_pop);
    HOOK(core2, NVTX_CBID_CORE2_DomainRangeStartEx, on_start);
    HOOK(core2, NVTX_CBID_CORE2_DomainRangeEnd, on_end);
    HOOK(core2, NVTX_CBID_CORE2_DomainMarkEx, on_mark);
    HOOK(core, NVTX_CBID_CORE_RangePushA, on_legacy_push_ascii);
    HOOK(core, NVTX_CBID_CORE_RangePushEx, on_legacy_push_ex);
    HOOK(core, NVTX_CBID_CORE_RangePop, on_legacy_pop);
    HOOK(core, NVTX_CBID_CORE_MarkA, on_legacy_mark_ascii);
    HOOK(core, NVTX_CBID_CORE_MarkEx, on_legacy_mark_ex);
    HOOK(core, NVTX_CBID_CORE_RangeStartA, on_legacy_start_ascii);
    HOOK(core, NVTX_CBID_CORE_RangeStartEx, on_legacy_start_ex);
    HOOK(core, NVTX_CBID_CORE_RangeEnd, on_legacy_end);
    return 1;
}
