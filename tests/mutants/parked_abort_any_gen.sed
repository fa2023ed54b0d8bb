# an ABORT from a parked endpoint marks its metadata aborted whatever generation it names: a
# stale or forged ABORT fails a fan-out room that endpoint's live open still waits for
s/^\t\t    r->parked\[i\]->gen == gen)$/\t\t    1)/
