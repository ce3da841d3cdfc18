// Prints what llmc/model_file.h makes of each model descriptor given on the command line, one line each:
//   <desc> L=<layers> C=<channels> NH=<heads> maxT=<max_seq_len> params=<count with the padded vocabulary>
//   <desc> not-a-descriptor          (gpt2_config_from_descriptor returned false: a checkpoint path)
// A bad descriptor ends the program with gpt2_config_from_descriptor's fatal() message and exit code 1.
// dev/test/descriptor_check.sh compares this with train_gpt2.py's config_from_descriptor.
#include <cstdio>

#include "llmc/model_file.h"

int main(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
        GPT2Config c{};
        if (!gpt2_config_from_descriptor(argv[i], &c)) {
            printf("%s not-a-descriptor\n", argv[i]);
            continue;
        }
        printf("%s L=%d C=%d NH=%d maxT=%d params=%zu\n", argv[i], c.num_layers, c.channels, c.num_heads,
               c.max_seq_len, gpt2_num_parameters(c));
    }
    return 0;
}
