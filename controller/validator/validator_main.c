/* gpu-validator program entry: validates the node's NVIDIA GPUs (see validator.h for exit codes).
 */
#include <stdio.h>

#include "validator.h"

int main(int argc, char **argv)
{
    return validator_main(argc, argv, stdout, stderr);
}
