/* Methods shared by the test and bench actor classes (shared_methods.h). */
#include "shared_methods.h"

adag_status_t shared_echo(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t in;
    adag_status_t st = adag_call_arg(call, 0, &in);
    if (st != ADAG_OK)
        return st;
    return adag_call_set_output(call, 0, in.data, in.size);
}
