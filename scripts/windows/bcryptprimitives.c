/* A stand-in for bcryptprimitives.dll under Wine (scripts/test-windows.sh).
 *
 * Rust's std (1.78 and later) imports ProcessPrng from bcryptprimitives.dll for
 * its random numbers (HashMap seeds, among others). Wine 8.0, the version Debian
 * 12 ships, has no such DLL, so every Rust .exe fails to load (exit 53) before
 * main. This DLL exports ProcessPrng and fills the buffer with RtlGenRandom
 * (advapi32's SystemFunction036), which Wine implements. It is only ever placed in
 * the test prefix's system32; nothing ships it.
 */
#include <windows.h>

/* RtlGenRandom: declared here because <ntsecapi.h> spells it only as a macro. */
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

/* Same contract as Windows' ProcessPrng: fills `length` bytes, returns TRUE. */
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        /* RtlGenRandom takes a ULONG length: feed it chunks. */
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
