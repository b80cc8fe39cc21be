-- A results.db written by palaestra's store before schema versions (user_version 0): a
-- failed episode cut by a limit has that limit as its status. Dumped with sqlite3's iterdump
-- from a store written by that code (src/palaestra/run/store.py at commit 8d0a0a8).
BEGIN TRANSACTION;
CREATE TABLE episodes (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    episode_id TEXT,
    task_id TEXT NOT NULL,
    family TEXT,
    category TEXT,
    difficulty TEXT,
    attempt INTEGER NOT NULL,
    try INTEGER NOT NULL DEFAULT 0,
    final INTEGER NOT NULL,
    seed INTEGER,
    status TEXT NOT NULL,
    end_reason TEXT,
    error_class TEXT,
    error_message TEXT,
    infra_error INTEGER NOT NULL DEFAULT 0,
    reward REAL NOT NULL,
    rewards TEXT NOT NULL,
    verified INTEGER NOT NULL,
    verifier_output TEXT,
    steps INTEGER NOT NULL,
    sandbox_start_s REAL,
    agent_s REAL,
    policy_s REAL,
    verifier_s REAL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    cost_usd REAL,
    wall_s REAL NOT NULL,
    finished_at REAL NOT NULL
);
INSERT INTO "episodes" VALUES(1,'0123456789ab','ep00000000000000','t-pass',NULL,'test','easy',0,0,1,0,'passed','submitted',NULL,NULL,0,1.0,'{"reward": 1.0}',1,'',2,0.1,0.2,0.01,0.3,10,5,0,NULL,1.0,1700000000.0);
INSERT INTO "episodes" VALUES(2,'0123456789ab','ep00000000000001','t-fail',NULL,'test','easy',0,0,1,1,'failed','submitted',NULL,NULL,0,0.0,'{"reward": 0.0}',1,'',2,0.1,0.2,0.01,0.3,10,5,0,NULL,1.0,1700000001.0);
INSERT INTO "episodes" VALUES(3,'0123456789ab','ep00000000000002','t-timeout',NULL,'test','easy',0,0,1,2,'agent_timeout','agent_timeout',NULL,NULL,0,0.0,'{"reward": 0.0}',1,'',2,0.1,0.2,0.01,0.3,10,5,0,NULL,1.0,1700000002.0);
INSERT INTO "episodes" VALUES(4,'0123456789ab','ep00000000000003','t-steps',NULL,'test','easy',0,0,1,3,'step_limit','step_limit',NULL,NULL,0,0.0,'{"reward": 0.0}',1,'',2,0.1,0.2,0.01,0.3,10,5,0,NULL,1.0,1700000003.0);
INSERT INTO "episodes" VALUES(5,'0123456789ab','ep00000000000004','t-trunc-pass',NULL,'test','easy',0,0,1,4,'passed','step_limit',NULL,NULL,0,1.0,'{"reward": 1.0}',1,'',2,0.1,0.2,0.01,0.3,10,5,0,NULL,1.0,1700000004.0);
INSERT INTO "episodes" VALUES(6,'0123456789ab','ep00000000000005','t-crash',NULL,'test','easy',0,0,0,5,'error','error','SandboxError','the sandbox died',1,0.0,'{"reward": 0.0}',0,'',2,0.1,0.2,0.01,0.3,10,5,0,NULL,1.0,1700000005.0);
INSERT INTO "episodes" VALUES(7,'0123456789ab','ep00000000000006','t-crash',NULL,'test','easy',0,1,1,5,'failed','submitted',NULL,NULL,0,0.0,'{"reward": 0.0}',1,'',2,0.1,0.2,0.01,0.3,10,5,0,NULL,1.0,1700000006.0);
INSERT INTO "episodes" VALUES(8,'0123456789ab','ep00000000000007','t-verifier',NULL,'test','easy',0,0,1,6,'error','submitted','VerifierError','tests/test.sh wrote no reward',0,0.0,'{"reward": 0.0}',1,'',2,0.1,0.2,0.01,0.3,10,5,0,NULL,1.0,1700000007.0);
INSERT INTO "episodes" VALUES(9,'0123456789ab','ep00000000000008','t-policy',NULL,'test','easy',0,0,1,7,'error','exception','ValueError','policy bug',0,0.0,'{"reward": 0.0}',0,'',2,0.1,0.2,0.01,0.3,10,5,0,NULL,1.0,1700000008.0);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    env_id TEXT NOT NULL,
    policy TEXT NOT NULL,
    scaffold TEXT NOT NULL,
    sandbox TEXT NOT NULL,
    config TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    stop_reason TEXT,
    palaestra_version TEXT NOT NULL
);
INSERT INTO "runs" VALUES('0123456789ab','old-run','scripted','bash','local','{"identity": {"env_id": "old-run", "policy": "scripted", "scaffold": "bash", "sandbox": "local", "attempts": 1, "seed": 0, "tasks": ["t-pass", "t-fail", "t-timeout", "t-steps", "t-trunc-pass", "t-crash", "t-verifier", "t-policy"], "env_overrides": {}}, "concurrency": 1, "retries": 1, "max_cost_usd": null, "max_trial_cost_usd": null}',1.79553129007119822505e+09,1700000100.0,NULL,'0.1.0');
CREATE TABLE steps (
    episode INTEGER NOT NULL REFERENCES episodes(id),
    turn INTEGER NOT NULL,
    messages_from INTEGER NOT NULL,
    new_messages TEXT NOT NULL,
    response TEXT NOT NULL,
    execution TEXT,
    PRIMARY KEY (episode, turn)
);
INSERT INTO "steps" VALUES(1,0,0,'[{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]','{"content": "```bash\necho hi\n```", "finish_reason": "stop"}','{"turn": 0, "command": "echo hi", "exit_code": 0, "output": "hi\n"}');
INSERT INTO "steps" VALUES(2,0,0,'[{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]','{"content": "```bash\necho hi\n```", "finish_reason": "stop"}','{"turn": 0, "command": "echo hi", "exit_code": 0, "output": "hi\n"}');
INSERT INTO "steps" VALUES(3,0,0,'[{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]','{"content": "```bash\necho hi\n```", "finish_reason": "stop"}','{"turn": 0, "command": "echo hi", "exit_code": 0, "output": "hi\n"}');
INSERT INTO "steps" VALUES(4,0,0,'[{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]','{"content": "```bash\necho hi\n```", "finish_reason": "stop"}','{"turn": 0, "command": "echo hi", "exit_code": 0, "output": "hi\n"}');
INSERT INTO "steps" VALUES(5,0,0,'[{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]','{"content": "```bash\necho hi\n```", "finish_reason": "stop"}','{"turn": 0, "command": "echo hi", "exit_code": 0, "output": "hi\n"}');
INSERT INTO "steps" VALUES(6,0,0,'[{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]','{"content": "```bash\necho hi\n```", "finish_reason": "stop"}','{"turn": 0, "command": "echo hi", "exit_code": 0, "output": "hi\n"}');
INSERT INTO "steps" VALUES(7,0,0,'[{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]','{"content": "```bash\necho hi\n```", "finish_reason": "stop"}','{"turn": 0, "command": "echo hi", "exit_code": 0, "output": "hi\n"}');
INSERT INTO "steps" VALUES(8,0,0,'[{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]','{"content": "```bash\necho hi\n```", "finish_reason": "stop"}','{"turn": 0, "command": "echo hi", "exit_code": 0, "output": "hi\n"}');
INSERT INTO "steps" VALUES(9,0,0,'[{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]','{"content": "```bash\necho hi\n```", "finish_reason": "stop"}','{"turn": 0, "command": "echo hi", "exit_code": 0, "output": "hi\n"}');
CREATE INDEX episodes_job ON episodes(run_id, task_id, attempt, final);
COMMIT;
