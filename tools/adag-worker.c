/* adag-worker: hosts one process actor. Started by the runtime with
 * `adag-worker --control-fd N`, by an agent (`adag-worker --agent`), or as
 * a rank of a PMIx job (`adag-worker --pmix`). */
#include "dag/proc/worker.h"

#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--pmix") == 0)
        return adag__pmix_main(argc, argv);
    return adag__worker_main(argc, argv);
}
