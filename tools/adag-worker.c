/* adag-worker: hosts one process actor. Started by the runtime with
 * `adag-worker --control-fd N`; not meant to be run by hand. */
#include "dag/worker.h"

int main(int argc, char **argv)
{
    return adag_worker_main(argc, argv);
}
